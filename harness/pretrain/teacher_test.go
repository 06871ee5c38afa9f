package pretrain

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

func testTasks(t *testing.T) []datasets.Task {
	t.Helper()
	m, err := synthmath.New(synthmath.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := synthcode.New(synthcode.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return []datasets.Task{c, m}
}

func taskByName(tasks []datasets.Task, name string) datasets.Task {
	for _, t := range tasks {
		if t.Name() == name {
			return t
		}
	}
	return nil
}

// strategyOf reads the strategy back out of a worker prompt.
func strategyOf(t *testing.T, tr Transcript) string {
	t.Helper()
	_, s, ok := strings.Cut(tr.Prompt[1].Content, "\nStrategy: ")
	if !ok {
		t.Fatalf("worker prompt without a strategy line: %q", tr.Prompt[1].Content)
	}
	return s
}

// TestPromptsAreWorkflowBuilders checks that every role's transcript prompt
// is exactly what the workflow's prompt builder returns for the same inputs.
func TestPromptsAreWorkflowBuilders(t *testing.T) {
	tasks := testTasks(t)
	const votes, maxSub = 3, 3
	teacher, err := NewTeacher(DefaultConfig(), tasks, votes, maxSub)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := int64(0); i < 300; i++ {
		tr, err := teacher.Transcript(i)
		if err != nil {
			t.Fatal(err)
		}
		task := taskByName(tasks, tr.Task)
		instr, p := task.Instructions(), tr.Problem
		var want []engine.Message
		switch tr.Role {
		case study.Generator:
			want = workflow.GeneratorPrompt(instr, p)
		case RoleReviser:
			src := teacher.sources[i%int64(len(tasks))]
			want = workflow.RevisionPrompt(instr, p, tr.Shown[0], feedback(src, p, tr.Shown[0], false))
		case study.Evaluator:
			want = workflow.EvaluatorPrompt(p, tr.Shown[0])
		case study.Aggregator:
			if len(tr.Shown) != votes {
				t.Fatalf("transcript %d: aggregator shown %d candidates, want %d", i, len(tr.Shown), votes)
			}
			want = workflow.AggregatorPrompt(p, tr.Shown)
		case study.Orchestrator:
			want = workflow.OrchestratorPrompt(p, maxSub)
		case study.Worker:
			want = workflow.WorkerPrompt(instr, p, strategyOf(t, tr))
		case study.Synthesizer:
			want = workflow.SynthesizerPrompt(instr, p, tr.Shown)
		default:
			t.Fatalf("transcript %d: unknown role %q", i, tr.Role)
		}
		if got := tr.Prompt; !reflect.DeepEqual(got, want) {
			t.Fatalf("transcript %d (%s %s): prompt differs from the workflow builder's\n got %q\nwant %q", i, tr.Task, tr.Role, got, want)
		}
		seen[tr.Task+"/"+tr.Role] = true
	}
	for _, task := range []string{synthmath.Name, synthcode.Name} {
		for _, role := range TeacherRoles {
			if !seen[task+"/"+role] {
				t.Errorf("no %s transcript of %s in 300 draws", role, task)
			}
		}
	}
}

// grade reports, with the workflow parsers and the task verifier as the
// ground truth, whether a transcript's completion is well-formed and
// whether it is right.
func grade(t *testing.T, task datasets.Task, tr Transcript, maxSub int) (compliant, right bool) {
	t.Helper()
	switch tr.Role {
	case study.Generator, RoleReviser, study.Worker, study.Synthesizer:
		v := task.Verify(context.Background(), tr.Problem, tr.Completion)
		return v.Answer != "", v.Correct
	case study.Evaluator:
		v, ok, _ := workflow.ParseVerdict(tr.Completion)
		return ok, ok && v.Correct == tr.ShownCorrect[0]
	case study.Aggregator:
		k, ok, _ := workflow.ParseSelection(tr.Completion, len(tr.Shown))
		return ok, tr.ShownCorrect[k-1]
	case study.Orchestrator:
		s, ok, _ := workflow.ParseStrategies(tr.Completion, maxSub)
		return ok, !s.Over
	}
	t.Fatalf("unknown role %q", tr.Role)
	return false, false
}

// TestCompletionsMatchNoiseLabels checks every transcript's completion
// against the ground truth: clean completions parse and are right, and each
// kind of noise has the effect it claims.
func TestCompletionsMatchNoiseLabels(t *testing.T) {
	tasks := testTasks(t)
	cfg := DefaultConfig()
	cfg.Noise = Noise{Slip: 0.3, WrongVerdict: 0.3, RandomSelection: 0.3, TooManyStrategies: 0.3, Malformed: 0.2}
	teacher, err := NewTeacher(cfg, tasks, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 600; i++ {
		tr, err := teacher.Transcript(i)
		if err != nil {
			t.Fatal(err)
		}
		task := taskByName(tasks, tr.Task)
		compliant, right := grade(t, task, tr, 3)
		malformed := tr.HasNoise(NoiseMalformed)
		if compliant == malformed && !(tr.Role == study.Orchestrator && tr.HasNoise(NoiseTooMany)) {
			t.Fatalf("transcript %d (%s %s, noise %v): compliant=%v\n%s", i, tr.Task, tr.Role, tr.Noise, compliant, tr.Completion)
		}
		if malformed {
			continue
		}
		wantRight := true
		switch tr.Role {
		case study.Generator, RoleReviser, study.Worker, study.Synthesizer:
			wantRight = !tr.HasNoise(NoiseSlip)
		case study.Evaluator:
			wantRight = !tr.HasNoise(NoiseWrongVerdict)
		case study.Orchestrator:
			wantRight = !tr.HasNoise(NoiseTooMany)
		case study.Aggregator:
			anyRight := false
			for _, ok := range tr.ShownCorrect {
				anyRight = anyRight || ok
			}
			if !anyRight || tr.HasNoise(NoiseRandomSelection) {
				continue // a random pick may or may not be right
			}
		}
		if right != wantRight {
			t.Fatalf("transcript %d (%s %s, noise %v): right=%v, want %v\n%s", i, tr.Task, tr.Role, tr.Noise, right, wantRight, tr.Completion)
		}
	}
}

// TestNoiseRatesHonored measures each rate with the parsers and the
// verifier over many transcripts and compares it with the configuration.
func TestNoiseRatesHonored(t *testing.T) {
	tasks := testTasks(t)
	cases := []struct {
		name  string
		noise Noise
		mix   RoleMix
	}{
		{"default", DefaultConfig().Noise, DefaultConfig().Roles},
		{"heavy", Noise{Slip: 0.4, WrongVerdict: 0.25, RandomSelection: 0.5, TooManyStrategies: 0.2, Malformed: 0.1},
			RoleMix{Generator: 1, Reviser: 1, Evaluator: 1, Aggregator: 1, Orchestrator: 1, Worker: 1, Synthesizer: 1}},
		{"clean", Noise{}, RoleMix{Generator: 2, Evaluator: 1, Aggregator: 1, Orchestrator: 1}},
	}
	const n = 3000
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Noise, cfg.Roles = tc.noise, tc.mix
			teacher, err := NewTeacher(cfg, tasks, 3, 3)
			if err != nil {
				t.Fatal(err)
			}
			roles := map[string]int{}
			var answers, wrongAnswers, verdicts, wrongVerdicts, orchs, over, malformed int
			for i := int64(0); i < n; i++ {
				tr, err := teacher.Transcript(i)
				if err != nil {
					t.Fatal(err)
				}
				roles[tr.Role]++
				task := taskByName(tasks, tr.Task)
				compliant, right := grade(t, task, tr, 3)
				if !compliant && !(tr.Role == study.Orchestrator && !right) {
					malformed++
					continue
				}
				switch tr.Role {
				case study.Generator, RoleReviser, study.Worker:
					answers++
					if !right {
						wrongAnswers++
					}
				case study.Evaluator:
					verdicts++
					if !right {
						wrongVerdicts++
					}
				case study.Orchestrator:
					orchs++
					if !right {
						over++
					}
				}
			}
			sum := 0.0
			for _, w := range tc.mix.Weights() {
				sum += w
			}
			for k, role := range TeacherRoles {
				want := tc.mix.Weights()[k] / sum
				near(t, "share of "+role, float64(roles[role])/n, want, n)
			}
			near(t, "malformed", float64(malformed)/n, tc.noise.Malformed, n)
			near(t, "slip", ratio(wrongAnswers, answers), tc.noise.Slip, answers)
			near(t, "wrong verdict", ratio(wrongVerdicts, verdicts), tc.noise.WrongVerdict, verdicts)
			near(t, "too many strategies", ratio(over, orchs), tc.noise.TooManyStrategies, orchs)
		})
	}
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// near fails when got is more than four binomial standard errors (plus a
// small floor) away from want.
func near(t *testing.T, what string, got, want float64, n int) {
	t.Helper()
	if n == 0 {
		if want > 0 {
			t.Errorf("%s: no samples", what)
		}
		return
	}
	tol := 4*math.Sqrt(want*(1-want)/float64(n)) + 0.005
	if math.Abs(got-want) > tol {
		t.Errorf("%s: rate %.4f, want %.4f +- %.4f (n=%d)", what, got, want, tol, n)
	}
}

func TestTeacherDeterministic(t *testing.T) {
	tasks := testTasks(t)
	a, err := NewTeacher(DefaultConfig(), tasks, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewTeacher(DefaultConfig(), tasks, 3, 3)
	other := DefaultConfig()
	other.Seed = 2
	c, _ := NewTeacher(other, tasks, 3, 3)
	differ := 0
	// b is read backwards, so the stream cannot depend on call order.
	for i := int64(49); i >= 0; i-- {
		x, err := a.Transcript(i)
		if err != nil {
			t.Fatal(err)
		}
		y, _ := b.Transcript(i)
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("transcript %d differs between two teachers of one config", i)
		}
		z, _ := c.Transcript(i)
		if z.Role != x.Role || z.Completion != x.Completion {
			differ++
		}
	}
	if differ < 10 {
		t.Fatalf("seed 2 changed only %d of 50 transcripts", differ)
	}
}

func TestNewTeacherErrors(t *testing.T) {
	tasks := testTasks(t)
	bad := DefaultConfig()
	bad.Noise.Slip = 1.5
	cases := []struct {
		name  string
		cfg   Config
		tasks []datasets.Task
		votes int
		sub   int
		want  string
	}{
		{"no tasks", DefaultConfig(), nil, 3, 3, "no tasks"},
		{"bad config", bad, tasks, 3, 3, "noise.slip"},
		{"votes", DefaultConfig(), tasks, 0, 3, "n_votes"},
		{"subtasks", DefaultConfig(), tasks, 3, 12, "max_subtasks"},
		{"nil task", DefaultConfig(), []datasets.Task{nil}, 3, 3, "nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTeacher(tc.cfg, tc.tasks, tc.votes, tc.sub)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	teacher, _ := NewTeacher(DefaultConfig(), tasks, 3, 3)
	if _, err := teacher.Transcript(-1); err == nil {
		t.Fatal("negative index accepted")
	}
	if _, err := teacher.RenderRole("synth-math", "poet", datasets.Problem{}, 1); err == nil || !strings.Contains(err.Error(), "poet") {
		t.Fatalf("unknown role: err = %v", err)
	}
	if _, err := teacher.RenderRole("dapo-math", study.Generator, datasets.Problem{}, 1); err == nil {
		t.Fatal("unknown task accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want string // "" = valid
	}{
		{"default", func(*Config) {}, ""},
		{"no default steps", func(c *Config) { c.Steps = map[string]int{"s": 10} }, "steps"},
		{"zero steps", func(c *Config) { c.Steps["l"] = 0 }, "steps.l"},
		{"batch", func(c *Config) { c.BatchSize = 0 }, "batch_size"},
		{"lr", func(c *Config) { c.LR = 0 }, "lr"},
		{"warmup", func(c *Config) { c.WarmupSteps = -1 }, "warmup_steps"},
		{"beta2", func(c *Config) { c.Beta2 = 1 }, "beta2"},
		{"nan clip", func(c *Config) { c.GradClip = math.NaN() }, "grad_clip"},
		{"negative share", func(c *Config) { c.Roles.Worker = -1 }, "roles.worker"},
		{"no roles", func(c *Config) { c.Roles = RoleMix{} }, "roles"},
		{"malformed", func(c *Config) { c.Noise.Malformed = 2 }, "noise.malformed"},
		{"candidates", func(c *Config) { c.CandidateCorrect = -0.1 }, "candidate_correct"},
		{"skilled", func(c *Config) { c.Supervisors = "skilled" }, ""},
		{"problem-check", func(c *Config) { c.Supervisors = "problem-check" }, ""},
		{"unknown recipe", func(c *Config) { c.Supervisors = "skiled" }, "supervisors"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid config rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "pretrain."+tc.want)):
				t.Fatalf("err = %v, want one naming pretrain.%s", err, tc.want)
			}
		})
	}
}
