package spec

import (
	"strconv"
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	opts := []string{"single", "eval-opt", "voting", "orch-workers", "cpu"}
	tests := []struct {
		v, want string
		ok      bool
	}{
		{"votign", "voting", true},
		{"Voting", "voting", true},
		{"eval_opt", "eval-opt", true},
		{"evalopt", "eval-opt", true},
		{"orch", "orch-workers", true}, // unambiguous prefix
		{"singel", "single", true},
		{"debate", "", false},
		{"vo", "", false}, // too short to guess
		{"s", "", false},
		{"tpu", "", false}, // not a typo of a name that starts differently
		{"voting", "", false},
	}
	for _, tc := range tests {
		got, ok := closest(tc.v, opts)
		if got != tc.want || ok != tc.ok {
			t.Errorf("closest(%q) = %q, %v; want %q, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}

// TestSpecSuggestions checks "did you mean" in the messages of Load for
// near-miss keys and values, at the line of the mistake.
func TestSpecSuggestions(t *testing.T) {
	tests := []struct {
		name, old, new string
		want           string
		at             string
	}{
		{"top-level key", "master_seed: 7", "master_sed: 7", `master_sed: unknown key "master_sed"; did you mean "master_seed"?`, "master_sed"},
		{"grpo key", "  steps: 20\n", "  step: 20\n", `grpo.step: unknown key "step"; did you mean "steps"?`, "step: 20"},
		{"eval key", "grpo:\n", "eval:\n  evry: 5\ngrpo:\n", `eval.evry: unknown key "evry"; did you mean "every"?`, "evry"},
		{"key far from any", "master_seed: 7", "master_seed: 7\ncolour: red", `colour: unknown key "colour"; allowed keys:`, "colour"},
		{"workflow value", "[voting, eval-opt]", "[votng, eval-opt]", `matrix.workflows[0]: "votng" is not allowed; did you mean "voting"?`, "votng"},
		{"workflow value with underscore", "[voting, eval-opt]", "[voting, eval_opt]", `"eval_opt" is not allowed; did you mean "eval-opt"?`, "eval_opt"},
		{"condition value", "[base, sa-rl, sp, ip]", "[base, sarl, sp, ip]", `matrix.conditions[1]: "sarl" is not allowed; did you mean "sa-rl"?`, "sarl"},
		{"loss agg value", "  steps: 20\n", "  steps: 20\n  loss_agg: token-means\n", `grpo.loss_agg: "token-means" is not allowed; did you mean "token-mean"?`, "loss_agg"},
		{"task name", "tasks: [synth-math]", "tasks: [synth-maths]", `matrix.tasks[0]: unknown task "synth-maths": did you mean "synth-math"?`, "synth-maths"},
		{"scale name", "scales: [s]", "scales: [smal]", `matrix.scales[0]: scale "smal" has no model: did you mean "small"?`, "scales:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := edit(t, baseSpec, tc.old, tc.new)
			if tc.name == "scale name" {
				text = edit(t, text, "  s:\n", "  small:\n")
			}
			path := writeSpec(t, text)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant one containing %s", err, tc.want)
			}
			checkLine(t, err, path, text, tc.at)
		})
	}
}

// checkLine checks that err names the first line of text holding at.
func checkLine(t *testing.T, err error, path, text, at string) {
	t.Helper()
	line := 0
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, at) {
			line = i + 1
			break
		}
	}
	if line == 0 {
		t.Fatalf("test bug: %q not in the text", at)
	}
	if want := path + ":" + strconv.Itoa(line) + ":"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\ndoes not point at line %d (%q)", err, line, at)
	}
}

// TestYAMLSyntaxLines checks that a YAML syntax error names the line of
// the problem (yaml.v3 itself reports the line where the enclosing block
// began, one too early) and that a tab in the indentation is said so.
func TestYAMLSyntaxLines(t *testing.T) {
	tests := []struct {
		name string
		text string
		line int
		want string
	}{
		{"bad indentation", "experiment: t\nmatrix:\n  workflows: [voting]\n tasks: [synth-math]\n", 4, "YAML syntax error: did not find expected key"},
		{"list item in a mapping", "experiment: t\ngrpo:\n  lora:\n    - 1\n    rank: 2\n", 5, "YAML syntax error: did not find expected '-' indicator"},
		{"unclosed flow list", "experiment: t\nseeds: [1, 2\nmaster_seed: 3\n", 2, "YAML syntax error: did not find expected ',' or ']'"},
		{"unclosed flow mapping", "experiment: t\nmodels:\n  s:\n    tiny: {hidden: 64\n  m: {}\n", 4, "YAML syntax error: did not find expected ',' or '}'"},
		{"mapping value in a scalar", "experiment: t\nmaster_seed: a: b\n", 2, "YAML syntax error: mapping values are not allowed in this context"},
		{"unterminated string", "experiment: \"t\nmaster_seed: 3\n", 1, "YAML syntax error: found unexpected end of stream"},
		{"tab before a key", "experiment: t\ngrpo:\n\tsteps: 3\n", 3, "a tab character in the indentation; YAML indents with spaces only"},
		{"tab after spaces", "experiment: t\ngrpo:\n  steps: 3\n\tlr: 1\n", 4, "a tab character in the indentation"},
		{"tab on the first line", "\texperiment: t\n", 1, "a tab character in the indentation"},
		{"tab on a blank line", "experiment: t\nseeds: [1]\n\t\nmaster_seed: 3\n", 3, "a tab character in the indentation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSpec(t, tc.text)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant one containing %q", err, tc.want)
			}
			if want := path + ":" + strconv.Itoa(tc.line) + ":"; !strings.Contains(err.Error(), want) {
				t.Errorf("error %v\ndoes not name line %d", err, tc.line)
			}
			if strings.Contains(err.Error(), "line ") {
				t.Errorf("error %v repeats yaml's own (misleading) line number", err)
			}
		})
	}
}
