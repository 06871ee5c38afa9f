package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const baseSpec = `experiment: t
master_seed: 7
seeds: [1, 2]
matrix:
  workflows: [voting, eval-opt]
  tasks: [synth-math]
  scales: [s]
  conditions: [base, sa-rl, sp, ip]
models:
  s:
    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}
grpo:
  steps: 20
  warmup_steps: 2
`

// writeSpec writes text to a spec file in a fresh folder and returns its path.
func writeSpec(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// edit replaces old (which must occur in base) by new.
func edit(t *testing.T, base, old, new string) string {
	t.Helper()
	if !strings.Contains(base, old) {
		t.Fatalf("test bug: %q not in base spec", old)
	}
	return strings.Replace(base, old, new, 1)
}

// loadFails loads base with old replaced by new and checks that Load fails
// with an error containing want, which it returns.
func loadFails(t *testing.T, base, old, new, want string) error {
	t.Helper()
	_, err := Load(writeSpec(t, edit(t, base, old, new)))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one containing %q", err, want)
	}
	return err
}

func TestLoadValidBase(t *testing.T) {
	s, err := Load(writeSpec(t, baseSpec))
	if err != nil {
		t.Fatalf("base spec: %v", err)
	}
	if s.GRPO.Steps != 20 || s.GRPO.Rollouts != 8 || s.GRPO.ClipHigh != 0.28 || s.Tasks["synth-math"].SynthMath == nil {
		t.Fatalf("defaults not applied: %+v", s.GRPO)
	}
	if s.Models["s"].Engine != "native" || s.Models["s"].Tiny.RopeTheta != 10000 {
		t.Fatalf("model defaults not applied: %+v", s.Models["s"])
	}
}

func TestLoadMalformed(t *testing.T) {
	t.Setenv("MARLOW_TEST_UNSET_VAR", "")
	os.Unsetenv("MARLOW_TEST_UNSET_VAR")
	type tc struct {
		name  string
		old   string // replaced by new in baseSpec; "" appends new
		new   string
		want  string // fragment of the message
		at    string // the error's line is the first line containing this ("" = do not check)
		whole string // when set, the whole file instead of an edit
	}
	cases := []tc{
		{name: "unknown top-level key", new: "extra: 1\n", want: `extra: unknown key "extra"; allowed keys: analysis, arms, checkpoint,`, at: "extra:"},
		{name: "unknown key in grpo", old: "  steps: 20\n", new: "  steps: 20\n  stepz: 3\n", want: `grpo.stepz: unknown key "stepz"`, at: "stepz"},
		{name: "unknown key at depth 3", new: "grpo:\n", old: "grpo:\n", want: "", at: ""}, // replaced below
		{name: "unknown key in tiny shape", old: "hidden: 64", new: "hiden: 64", want: `models.s.tiny.hiden: unknown key "hiden"`, at: "hiden"},
		{name: "unknown key in task override", new: "tasks:\n  synth-math:\n    grpo:\n      bogus: 1\n", want: `tasks.synth-math.grpo.bogus: unknown key`, at: "bogus"},
		{name: "unknown key in matrix", old: "  scales: [s]\n", new: "  scales: [s]\n  scale: [m]\n", want: `matrix.scale: unknown key "scale"; did you mean "scales"? (allowed keys: conditions, scales, tasks, workflows)`, at: "scale: [m]"},
		{name: "wrong type string for int", old: "steps: 20", new: "steps: ten", want: `grpo.steps: expected an integer, got string "ten"`, at: "steps: ten"},
		{name: "wrong type list for number", new: "eval:\n  every: [1]\n", want: "eval.every: expected an integer, got a list", at: "every:"},
		{name: "wrong type seeds scalar", old: "seeds: [1, 2]", new: "seeds: 1", want: "seeds: expected a list, got integer 1", at: "seeds:"},
		{name: "wrong type bool", new: "eval:\n  before_training: yes\n", want: `eval.before_training: expected a boolean (true or false), got string "yes"`, at: "before_training"},
		{name: "wrong type section", old: "matrix:\n", new: "matrix: [a]\nx:\n", want: "matrix: expected a mapping, got a list", at: "matrix:"},
		{name: "float for int", old: "steps: 20", new: "steps: 2.5", want: "grpo.steps: expected an integer, got number 2.5", at: "steps:"},
		{name: "negative rollouts", old: "  steps: 20\n", new: "  steps: 20\n  rollouts: -4\n", want: "grpo.rollouts: must be in [2, 1024], got -4", at: "rollouts"},
		{name: "negative steps", old: "steps: 20", new: "steps: -1", want: "grpo.steps: must be in [1, 16777216], got -1", at: "steps:"},
		{name: "negative train size", new: "tasks:\n  synth-math:\n    train_size: -10\n", want: "tasks.synth-math.train_size: must be >= 0, got -10", at: "train_size"},
		{name: "negative seed", old: "seeds: [1, 2]", new: "seeds: [-1, 2]", want: "seeds[0]: must be >= 0, got -1", at: "seeds:"},
		{name: "negative master seed", old: "master_seed: 7", new: "master_seed: -7", want: "master_seed: must be an integer in [0, 18446744073709551615], got -7", at: "master_seed"},
		{name: "unknown workflow", old: "[voting, eval-opt]", new: "[voting, debate]", want: `matrix.workflows[1]: "debate" is not allowed; allowed values: single, eval-opt, voting, orch-workers`, at: "debate"},
		{name: "unknown condition", old: "[base, sa-rl, sp, ip]", new: "[base, ma-rl]", want: `matrix.conditions[1]: "ma-rl" is not allowed; did you mean "sa-rl"? (allowed values: base, sa-rl, sp, ip)`, at: "ma-rl"},
		{name: "unknown task", old: "tasks: [synth-math]", new: "tasks: [poetry]", want: `matrix.tasks[0]: unknown task "poetry"`, at: "poetry"},
		{name: "unknown source", new: "tasks:\n  synth-math:\n    source: gsm8k\n", want: `tasks.synth-math.source: "gsm8k" is not allowed; allowed values: synth-math, synth-code, dapo-math, deepcoder`, at: "gsm8k"},
		{name: "clip high below low", old: "  steps: 20\n", new: "  steps: 20\n  clip_low: 0.3\n  clip_high: 0.2\n", want: "grpo.clip_high: must be >= clip_low (0.3), got 0.2", at: "clip_high"},
		{name: "clip low against default high", old: "  steps: 20\n", new: "  steps: 20\n  clip_low: 0.5\n", want: "grpo.clip_high: must be >= clip_low (0.5), got 0.28", at: "grpo:"},
		{name: "missing model path", old: "    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\n", new: "    engine: torch\n", want: "models.s.checkpoint: missing: a model needs a checkpoint path", at: "  s:"},
		{name: "unset env var", old: "    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\n", new: "    checkpoint: ${MARLOW_TEST_UNSET_VAR}/Qwen3-0.6B\n", want: "models.s.checkpoint: environment variable MARLOW_TEST_UNSET_VAR is not set", at: "checkpoint:"},
		{name: "wrong_math without a checking recipe", new: "pretrain:\n  wrong_math: {slip: 1}\n", want: `pretrain.wrong_math: needs a checking supervisors recipe (problem-check, pair-check, first-slip, candidate-first), not ""`, at: "wrong_math"},
		{name: "selection without a checking recipe", new: "pretrain:\n  selection: majority-first\n", want: `pretrain.selection: needs a checking supervisors recipe`, at: "selection"},
		{name: "unknown selection", new: "pretrain:\n  supervisors: first-slip\n  selection: plurality\n", want: `pretrain.selection: "plurality" is not allowed; allowed values: majority-first`, at: "selection"},
		{name: "outvoted without a selection", new: "pretrain:\n  supervisors: first-slip\n  outvoted: 0.5\n", want: `pretrain.outvoted: needs pretrain.selection (majority-first, majority-adjacent, majority-match, majority-named, majority-tagged, majority-repeat, majority-compact)`, at: "outvoted"},
		{name: "outvoted above 1", new: "pretrain:\n  supervisors: first-slip\n  selection: majority-named\n  outvoted: 1.5\n", want: `pretrain.outvoted: must be in [0, 1], got 1.5`, at: "outvoted"},
		{name: "wrong_math with no share", new: "pretrain:\n  supervisors: first-slip\n  wrong_math: {slip: 0}\n", want: "pretrain.wrong_math: at least one kind needs a positive share", at: "wrong_math"},
		{name: "wrong_math negative share", new: "pretrain:\n  supervisors: first-slip\n  wrong_math: {slip: 1, answer: -1}\n", want: "pretrain.wrong_math.answer: must be in [0, 1e+06], got -1", at: "wrong_math"},
		{name: "wrong_math unknown kind", new: "pretrain:\n  supervisors: first-slip\n  wrong_math: {slips: 1}\n", want: `pretrain.wrong_math.slips: unknown key "slips"`, at: "slips"},
		{name: "torch key on native", old: "    tiny: {hidden", new: "    device: cuda\n    tiny: {hidden", want: `models.s.device: is a setting of the torch engine; this model's engine is "native"`},
		{name: "unknown device", old: "    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\n", new: "    engine: torch\n    device: tpu\n    checkpoint: /m\n", want: `models.s.device: "tpu" is not allowed; allowed values: auto, cuda, cpu`, at: "tpu"},
		{name: "unknown dtype", old: "    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\n", new: "    engine: torch\n    dtype: fp8\n    checkpoint: /m\n", want: `models.s.dtype: "fp8" is not allowed; allowed values: auto, float32, bfloat16, float16`, at: "fp8"},
		{name: "unknown gen backend", old: "    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\n", new: "    engine: torch\n    gen_backend: vllm\n    checkpoint: /m\n", want: `models.s.gen_backend: "vllm" is not allowed; allowed values: reference, slots`, at: "vllm"},
		{name: "kv fraction out of range", old: "    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\n", new: "    engine: torch\n    kv_cache_fraction: 1.5\n    checkpoint: /m\n", want: "models.s.kv_cache_fraction: 1.5 is not in (0, 1)", at: "kv_cache_fraction"},
		{name: "gen backend on native", old: "    tiny: {hidden", new: "    gen_backend: slots\n    tiny: {hidden", want: `models.s.gen_backend: is a setting of the torch engine; this model's engine is "native"`},
		{name: "duplicate seeds", old: "seeds: [1, 2]", new: "seeds: [1, 2, 1]", want: "seeds[2]: duplicate seed 1 (also seeds[0])", at: "seeds:"},
		{name: "empty seeds", old: "seeds: [1, 2]", new: "seeds: []", want: "seeds: must list at least one seed", at: "seeds:"},
		{name: "empty workflows", old: "[voting, eval-opt]", new: "[]", want: "matrix.workflows: must not be empty", at: "workflows:"},
		{name: "missing matrix", old: "matrix:\n  workflows: [voting, eval-opt]\n  tasks: [synth-math]\n  scales: [s]\n  conditions: [base, sa-rl, sp, ip]\n", new: "", want: "matrix: required key is missing"},
		{name: "missing matrix key", old: "  conditions: [base, sa-rl, sp, ip]\n", new: "", want: "matrix.conditions: required key is missing", at: "matrix:"},
		{name: "yaml syntax error", old: "  steps: 20\n", new: "  steps: [20\n  lr: 1\n", want: "YAML syntax error", at: ""},
		{name: "yaml bad indentation", old: "  tasks: [synth-math]\n", new: "  tasks: [synth-math]\n scales2: [s]\n", want: "YAML syntax error", at: ""},
		{name: "loss agg not allowed", old: "  steps: 20\n", new: "  steps: 20\n  loss_agg: mean\n", want: `grpo.loss_agg: "mean" is not allowed; allowed values: token-mean, seq-mean-token-mean, seq-mean-token-sum`, at: "loss_agg"},
		{name: "schedule not allowed", old: "  steps: 20\n", new: "  steps: 20\n  schedule: linear\n", want: `grpo.schedule: "linear" is not allowed; allowed values: cosine, constant`, at: "schedule"},
		{name: "file source without path", old: "tasks: [synth-math]", new: "tasks: [dapo-math]", want: "tasks.dapo-math.path: missing: source dapo-math reads a file"},
		{name: "answer mode on synth", new: "tasks:\n  synth-math:\n    answer_mode: boxed\n", want: "tasks.synth-math.answer_mode: only used by source dapo-math", at: "answer_mode"},
		{name: "synth-code knobs on synth-math", new: "tasks:\n  synth-math:\n    synth_code: {stages_min: 2}\n", want: "tasks.synth-math.synth_code: only used by source synth-code", at: "synth_code"},
		{name: "checkpoint and tiny", old: "    tiny:", new: "    checkpoint: /m\n    tiny:", want: "models.s: set either checkpoint or tiny, not both", at: "  s:"},
		{name: "scale without model", old: "scales: [s]", new: "scales: [s, m]", want: `matrix.scales[1]: scale "m" has no model`, at: "scales:"},
		{name: "model not in matrix", new: "  m:\n    tiny: {}\n", old: "grpo:\n", want: "", at: ""}, // replaced below
		{name: "kv heads not a divisor", old: "kv_heads: 2", new: "kv_heads: 3", want: "models.s.tiny.kv_heads: heads (4) must be a multiple of kv_heads (3)", at: "kv_heads"},
		{name: "n_votes without voting", old: "[voting, eval-opt]", new: "[eval-opt]\nworkflow:\n  n_votes: 5", want: "workflow.n_votes: only used by workflow voting", at: "n_votes"},
		{name: "kl role not in workflows", old: "  steps: 20\n", new: "  steps: 20\n  kl_coef: {orchestrator: 0.1}\n", want: `grpo.kl_coef.orchestrator: "orchestrator" is not allowed; allowed values: generator, evaluator, aggregator`, at: "kl_coef"},
		{name: "max new tokens unknown role", old: "  steps: 20\n", new: "  steps: 20\n  max_new_tokens: {critic: 10}\n", want: `grpo.max_new_tokens.critic: "critic" is not allowed; allowed values: default, generator`, at: "max_new_tokens"},
		{name: "lora target unknown", old: "  steps: 20\n", new: "  steps: 20\n  lora:\n    targets: [qkv]\n", want: `grpo.lora.targets[0]: "qkv" is not allowed; allowed values: q_proj,`, at: "targets"},
		{name: "duplicate key", old: "  steps: 20\n", new: "  steps: 20\n  steps: 30\n", want: "grpo.steps: duplicate key (first set on line 13)", at: "steps: 30"},
		{name: "alias", old: "steps: 20", new: "lr: &m 1\n  steps: *m", want: "grpo.steps: YAML aliases (*m) are not supported", at: "*m"},
		{name: "warmup beyond steps", old: "warmup_steps: 2", new: "warmup_steps: 50", want: "grpo.warmup_steps: 50 exceeds steps (20)", at: "warmup_steps"},
		{name: "default warmup beyond steps", old: "  steps: 20\n  warmup_steps: 2\n", new: "  steps: 4\n", want: "grpo.steps: 4 is below warmup_steps (15, the default): set grpo.warmup_steps to at most 4", at: "steps: 4"},
		{name: "default warmup beyond a model's steps", whole: strings.Replace(strings.Replace(baseSpec, "  warmup_steps: 2\n", "", 1), "    tiny:", "    grpo: {steps: 3}\n    tiny:", 1), want: "models.s.grpo.steps: 3 is below warmup_steps (15, the default): set grpo.warmup_steps to at most 3", at: "grpo: {steps: 3}"},
		{name: "zero temperature", old: "  steps: 20\n", new: "  steps: 20\n  temperature: 0\n", want: "grpo.temperature: must be in (0, 10], got 0", at: "temperature"},
		{name: "ci out of range", new: "analysis:\n  ci: 1.5\n", want: "analysis.ci: must be in (0, 1], got 1.5", at: "ci:"},
		{name: "integer overflow", old: "steps: 20", new: "steps: 99999999999999999999", want: "grpo.steps: expected an integer", at: "steps:"},
		{name: "nan", old: "  steps: 20\n", new: "  steps: 20\n  lr: .nan\n", want: "grpo.lr: must be a finite number", at: "lr:"},
		{name: "bad experiment name", old: "experiment: t", new: "experiment: My Study", want: `experiment: "My Study" must match`, at: "experiment:"},
		{name: "eval samples zero", new: "eval:\n  samples: 0\n", want: "eval.samples: must be in [1, 64], got 0", at: "samples:"},
		{name: "eval samples too many", new: "eval:\n  samples: 65\n", want: "eval.samples: must be in [1, 64], got 65", at: "samples:"},
		{name: "eval larger than validation split", new: "eval:\n  val_size: 500\n", want: "eval.val_size: 500 exceeds the validation split of task synth-math", at: "val_size"},
		{name: "first validation larger than the split", new: "eval:\n  val_size: 8\n  first_val_size: 500\n", want: "eval.first_val_size: 500 exceeds the validation split of task synth-math", at: "first_val_size"},
		{name: "first validation not above val_size", new: "eval:\n  val_size: 8\n  first_val_size: 8\n", want: "eval.first_val_size: 8: want 0 (the first validation uses val_size's problems) or more than val_size (8)", at: "first_val_size"},
		{name: "first validation with every problem validated", new: "eval:\n  first_val_size: 8\n", want: "eval.first_val_size: 8 with val_size 0: every validation already uses the whole validation split", at: "first_val_size"},
		{name: "plans no runs", old: "[voting, eval-opt]", new: "[single]", whole: "", want: "", at: ""}, // replaced below
		{whole: "", name: "empty file", want: "file is empty"},
		{name: "synth math overflow", new: "tasks:\n  synth-math:\n    synth_math: {operands_max: 12, value_max: 100}\n", want: "tasks.synth-math.synth_math.value_max: value_max^operands_max = 100^12 exceeds 1e15", at: "synth_math"},
		{name: "synth code lists inverted", old: "tasks: [synth-math]", new: "tasks: [synth-code]\ntasks:\n  synth-code:\n    synth_code:\n      list_min: 5\n      list_max: 2", want: "tasks.synth-code.synth_code.list_max: must be >= list_min (5), got 2", at: "list_max"},
		{name: "val frac on synth", new: "tasks:\n  synth-math:\n    val_frac: 0.2\n", want: "tasks.synth-math.val_frac: only used by file sources", at: "val_frac"},
		{name: "unknown deepcoder subset", whole: fileTask("deepcoder", "tasks:\n  deepcoder:\n    path: /data/dc\n    subsets: [primeintellect, apps]\n"), want: `tasks.deepcoder.subsets[1]: "apps" is not allowed; allowed values: lcbv5, primeintellect, taco, codeforces`, at: "subsets"},
		{name: "repeated deepcoder subset", whole: fileTask("deepcoder", "tasks:\n  deepcoder:\n    path: /data/dc\n    subsets: [taco, taco]\n"), want: `tasks.deepcoder.subsets[1]: duplicate "taco"`, at: "subsets"},
		{name: "empty deepcoder subsets", whole: fileTask("deepcoder", "tasks:\n  deepcoder:\n    path: /data/dc\n    subsets: []\n"), want: "tasks.deepcoder.subsets: must not be empty", at: "subsets"},
		{name: "test path with val frac", whole: fileTask("deepcoder", "tasks:\n  deepcoder:\n    path: /data/dc\n    test_path: /data/dc\n    val_frac: 0.2\n"), want: "tasks.deepcoder.val_frac: not used with test_path", at: "val_frac"},
		{name: "empty test path", whole: fileTask("deepcoder", "tasks:\n  deepcoder:\n    path: /data/dc\n    test_path: \"\"\n"), want: "tasks.deepcoder.test_path: must not be empty", at: "test_path"},
		{name: "language on deepcoder", whole: fileTask("deepcoder", "tasks:\n  deepcoder:\n    path: /data/dc\n    language: en\n"), want: "tasks.deepcoder.language: only used by source dapo-math", at: "language"},
		{name: "unknown dapo language", whole: fileTask("dapo-math", "tasks:\n  dapo-math:\n    path: /data/d.parquet\n    language: fr\n"), want: `tasks.dapo-math.language: "fr" is not allowed; allowed values: all, en, cn`, at: "language"},
		{name: "subsets on dapo", whole: fileTask("dapo-math", "tasks:\n  dapo-math:\n    path: /data/d.parquet\n    subsets: [taco]\n"), want: "tasks.dapo-math.subsets: only used by source deepcoder", at: "subsets"},
		{name: "file source without mapping", whole: fileTask("gsm8k", "tasks:\n  gsm8k:\n    source: file\n    path: /data/g.jsonl\n"), want: "tasks.gsm8k.file: missing: source file needs a field mapping"},
		{name: "file verifier unknown", whole: fileTask("gsm8k", "tasks:\n  gsm8k:\n    source: file\n    path: /data/g.jsonl\n    file:\n      verifier: exact\n      problem: question\n      answer: answer\n"), want: `tasks.gsm8k.file.verifier: "exact" is not a verifier; use one of answer, boxed, code-tests`, at: "verifier"},
		{name: "file answer missing", whole: fileTask("gsm8k", "tasks:\n  gsm8k:\n    source: file\n    path: /data/g.jsonl\n    file:\n      verifier: boxed\n      problem: question\n"), want: "tasks.gsm8k.file.answer: missing: verifier boxed needs the field that holds the final answer"},
		{name: "file code tests missing", whole: fileTask("mbpp", "tasks:\n  mbpp:\n    source: file\n    path: /data/m.jsonl\n    file:\n      verifier: code-tests\n      problem: text\n      answer: code\n"), want: "tasks.mbpp.file.tests: missing: verifier code-tests needs the field that holds the tests"},
		{name: "file format unknown", whole: fileTask("gsm8k", "tasks:\n  gsm8k:\n    source: file\n    path: /data/g.csv\n    file: {verifier: answer, problem: q, answer: a}\n"), want: "tasks.gsm8k.file.format: /data/g.csv: cannot tell the format from the extension"},
		{name: "file mapping on dapo", whole: fileTask("dapo-math", "tasks:\n  dapo-math:\n    path: /data/d.parquet\n    file: {verifier: answer, problem: q, answer: a}\n"), want: "tasks.dapo-math.file: only used by source file, not dapo-math", at: "file:"},
		{name: "test path on synth", new: "tasks:\n  synth-math:\n    test_path: /x\n", want: "tasks.synth-math.test_path: only used by source deepcoder", at: "test_path"},
		{name: "empty matrix", old: "matrix:\n  workflows: [voting, eval-opt]\n  tasks: [synth-math]\n  scales: [s]\n  conditions: [base, sa-rl, sp, ip]\n", new: "matrix: {}\n", want: "matrix.workflows: required key is missing", at: "matrix:"},
		{name: "empty list in task override", new: "tasks:\n  synth-math:\n    grpo:\n      lora: {targets: []}\n", want: "tasks.synth-math.grpo.lora.targets: must not be empty; allowed values: q_proj", at: "lora:"},
		{name: "scalar for mapping", old: "  steps: 20\n", new: "  steps: 20\n  kl_coef: 0.1\n", want: "grpo.kl_coef: expected a mapping, got number 0.1", at: "kl_coef"},
		{name: "unknown key in model override", old: "    tiny:", new: "    grpo: {lrr: 1}\n    tiny:", want: `models.s.grpo.lrr: unknown key "lrr"`, at: "lrr"},
		{name: "range error in model override", old: "    tiny:", new: "    grpo:\n      clip_high: 0.1\n    tiny:", want: "models.s.grpo.clip_high: must be >= clip_low (0.2), got 0.1", at: "clip_high"},
		{whole: "- a\n- b\n", name: "top-level list", want: "a spec must be a mapping of sections, got a list", at: "- a"},
		{name: "coherence without lambda", old: "  steps: 20\n", new: "  steps: 20\n  coherence: {ema_decay: 0.8}\n", want: "grpo.coherence.lambda: must be in (0, 1] (an aligned gradient is scaled by 1 - lambda; set it, there is no default), got 0", at: "coherence"},
		{name: "coherence lambda too big", old: "  steps: 20\n", new: "  steps: 20\n  coherence:\n    lambda: 1.5\n", want: "grpo.coherence.lambda: must be in (0, 1]", at: "lambda"},
		{name: "coherence ema decay of 1", old: "  steps: 20\n", new: "  steps: 20\n  coherence: {lambda: 0.5, ema_decay: 1}\n", want: "grpo.coherence.ema_decay: must be in [0, 1)", at: "coherence"},
		{name: "coherence unknown form", old: "  steps: 20\n", new: "  steps: 20\n  coherence: {lambda: 0.5, form: gradient}\n", want: `grpo.coherence.form: must be step (the factors multiply the optimizer's step) or absent (the paper's form: they multiply each role's gradient), got "gradient"`, at: "coherence"},
		{name: "coherence unknown key", old: "  steps: 20\n", new: "  steps: 20\n  coherence: {lambda: 0.5, window: 10}\n", want: `grpo.coherence.window: unknown key "window"`, at: "window"},
		{whole: baseSpec + "---\nexperiment: u\n", name: "two documents", want: "more than one YAML document", at: "---"},
	}
	// Fill in the cases whose edit is clearer written out.
	for i := range cases {
		switch cases[i].name {
		case "unknown key at depth 3":
			cases[i].old, cases[i].new = "  steps: 20\n", "  steps: 20\n  lora:\n    rnk: 8\n"
			cases[i].want, cases[i].at = `grpo.lora.rnk: unknown key "rnk"; did you mean "rank"? (allowed keys: alpha, rank, targets)`, "rnk"
		case "model not in matrix":
			cases[i].old, cases[i].new = "grpo:\n", "  m:\n    checkpoint: /x\ngrpo:\n"
			cases[i].want, cases[i].at = `models.m: scale "m" is not in matrix.scales (s)`, "  m:"
		case "plans no runs":
			cases[i].old, cases[i].new = "[base, sa-rl, sp, ip]", "[sp, ip]\n"
			cases[i].whole = "-"
		}
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var text string
			switch {
			case c.whole == "-":
				text = edit(t, edit(t, baseSpec, c.old, c.new), "[voting, eval-opt]", "[single]")
			case c.whole != "" || c.name == "empty file":
				text = c.whole
			case c.old == "":
				text = baseSpec + c.new
			default:
				text = edit(t, baseSpec, c.old, c.new)
			}
			path := writeSpec(t, text)
			s, err := Load(path)
			if c.name == "plans no runs" {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				_, err = Plan(s)
				if err == nil || !strings.Contains(err.Error(), "the matrix plans no runs") {
					t.Fatalf("Plan error = %v, want 'the matrix plans no runs'", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error for:\n%s", text)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error\n%s\ndoes not contain\n%s", msg, c.want)
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error is %T, want *spec.Error", err)
			}
			if !strings.Contains(msg, path+":") {
				t.Errorf("error does not name the file %s: %s", path, msg)
			}
			if c.at != "" {
				line := 0
				for i, l := range strings.Split(text, "\n") {
					if strings.Contains(l, c.at) {
						line = i + 1
						break
					}
				}
				found := false
				for _, fe := range se.Errors {
					if strings.Contains(fe.Error(), c.want) && fe.Line == line {
						found = true
					}
				}
				if !found {
					t.Fatalf("no error %q at line %d (first line containing %q); got:\n%s", c.want, line, c.at, msg)
				}
			}
		})
	}
}

// A misspelt workflow is one error with a suggestion, not one more error
// for each role-keyed setting or workflow knob of the workflow meant.
func TestWorkflowTypoIsOneError(t *testing.T) {
	text := edit(t, baseSpec, "[voting, eval-opt]", "[votng, eval-opt]")
	text = edit(t, text, "grpo:\n", "workflow:\n  n_votes: 3\ngrpo:\n")
	text = edit(t, text, "  steps: 20\n", "  steps: 20\n  kl_coef: {generator: 0.1, aggregator: 0.5}\n  max_new_tokens: {default: 64, aggregator: 16}\n")
	_, err := Load(writeSpec(t, text))
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *spec.Error", err)
	}
	if len(se.Errors) != 1 || !strings.Contains(se.Errors[0].Error(), `matrix.workflows[0]: "votng" is not allowed; did you mean "voting"?`) {
		t.Fatalf("want one error about the workflow's name, got %d:\n%v", len(se.Errors), err)
	}
	// The same settings with the name right are valid, and with the name
	// right but a role the workflows do not call, that role is still named.
	if _, err := Load(writeSpec(t, strings.Replace(text, "votng", "voting", 1))); err != nil {
		t.Fatalf("the corrected spec: %v", err)
	}
	_, err = Load(writeSpec(t, strings.Replace(strings.Replace(text, "votng", "voting", 1), "aggregator: 0.5", "synthesizer: 0.5", 1)))
	if err == nil || !strings.Contains(err.Error(), `grpo.kl_coef.synthesizer: "synthesizer" is not allowed`) {
		t.Fatalf("a role outside the workflows: %v", err)
	}
}

func TestYAMLSyntaxErrorLine(t *testing.T) {
	text := edit(t, baseSpec, "  steps: 20\n", "  steps: 20\n  lr: 1: 2\n")
	_, err := Load(writeSpec(t, text))
	var se *Error
	if !errors.As(err, &se) || len(se.Errors) != 1 {
		t.Fatalf("want one syntax error, got %v", err)
	}
	if se.Errors[0].Line != 14 {
		t.Fatalf("syntax error line = %d, want 14: %v", se.Errors[0].Line, err)
	}
}

func TestLoadCollectsAllErrors(t *testing.T) {
	text := edit(t, baseSpec, "  steps: 20\n", "  steps: -3\n  rollouts: 1\n  lr: x\n")
	text = edit(t, text, "seeds: [1, 2]", "seeds: [2, 2]")
	text += "bogus: true\n"
	_, err := Load(writeSpec(t, text))
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("want *Error, got %v", err)
	}
	want := []string{"seeds[1]: duplicate seed 2", "grpo.steps: must be in", "grpo.rollouts: must be in", "grpo.lr: expected a number", "bogus: unknown key"}
	if len(se.Errors) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(se.Errors), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(se.Errors[i].Error(), w) {
			t.Errorf("error %d = %q, want it to contain %q (errors sorted by line)", i, se.Errors[i].Error(), w)
		}
	}
}

func TestTorchModelSettings(t *testing.T) {
	t.Setenv("MARLOW_TEST_PY", "/opt/venv/bin/python")
	text := edit(t, baseSpec, "    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\n",
		"    engine: torch\n    checkpoint: /models/Qwen3-0.6B\n    python: ${MARLOW_TEST_PY:-python3}\n    device: cpu\n    dtype: float32\n    gen_tokens: 4096\n")
	plain, err := Load(writeSpec(t, text))
	if err != nil {
		t.Fatal(err)
	}
	plainRuns, err := Plan(plain)
	if err != nil {
		t.Fatal(err)
	}
	text = strings.Replace(text, "    gen_tokens: 4096\n", "    gen_tokens: 4096\n    gen_backend: slots\n    kv_cache_fraction: 0.5\n", 1)
	s, err := Load(writeSpec(t, text))
	if err != nil {
		t.Fatal(err)
	}
	m := s.Models["s"]
	if m.Python != "/opt/venv/bin/python" || m.Device != "cpu" || m.DType != "float32" || m.GenTokens != 4096 {
		t.Fatalf("torch settings: %+v", m)
	}
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	mc := runs[0].Config.Model
	if mc.Python != "/opt/venv/bin/python" || mc.Device != "cpu" || mc.GenTokens != 4096 || mc.GenBackend != "slots" || mc.KVCacheFraction != 0.5 {
		t.Fatalf("run model config: %+v", mc)
	}
	// The backend is hashed (it changes tokens within float noise); the pool's size is not.
	if runs[0].ConfigHash == plainRuns[0].ConfigHash {
		t.Error("gen_backend: slots left the config hash unchanged")
	}
	os.Unsetenv("MARLOW_TEST_PY")
	for in, want := range map[string]string{"python3": "python3", "${MARLOW_TEST_PY:-python3.12}": "python3.12", "venv/bin/python": "/spec/dir/venv/bin/python"} {
		if got, err := resolveCommand("/spec/dir/paper.yaml", in); err != nil || got != want {
			t.Errorf("resolveCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestPathsResolveAgainstSpecFile(t *testing.T) {
	t.Setenv("MARLOW_TEST_DATA", "/data/root")
	os.Unsetenv("MARLOW_TEST_MISSING")
	cases := []struct {
		in, want string
	}{
		{"${MARLOW_TEST_DATA}/dapo.parquet", "/data/root/dapo.parquet"},
		{"${MARLOW_TEST_MISSING:-../data}/dapo.parquet", "/spec/data/dapo.parquet"},
		{"${MARLOW_TEST_DATA:-../data}/x", "/data/root/x"},
		{"rel/file.jsonl", "/spec/dir/rel/file.jsonl"},
		{"/abs/file", "/abs/file"},
	}
	for _, c := range cases {
		got, err := resolvePath("/spec/dir/paper.yaml", c.in)
		if err != nil || got != c.want {
			t.Errorf("resolvePath(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"${MARLOW_TEST_MISSING}/x", "${UNCLOSED/x", "${1BAD}/x"} {
		if _, err := resolvePath("/spec/dir/paper.yaml", bad); err == nil {
			t.Errorf("resolvePath(%q): no error", bad)
		}
	}
}

func TestFileSourceOptions(t *testing.T) {
	text := edit(t, baseSpec, "tasks: [synth-math]", "tasks: [dapo-math, deepcoder]") + `tasks:
  dapo-math:
    path: data/dapo.parquet
  deepcoder:
    path: data/DeepCoder-Preview-Dataset
    subsets: [primeintellect]
    test_path: data/tests
`
	path := writeSpec(t, text)
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	if d := s.Tasks["dapo-math"]; d.Language != "all" {
		t.Fatalf("dapo language default %q", d.Language)
	}
	dc := s.Tasks["deepcoder"]
	if len(dc.Subsets) != 1 || dc.Subsets[0] != "primeintellect" || dc.TestPath != filepath.Join(dir, "data/tests") {
		t.Fatalf("deepcoder %+v", dc)
	}
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range runs {
		d := r.Config.Data
		seen[d.Source] = true
		switch d.Source {
		case "deepcoder":
			if d.TestPath != dc.TestPath || len(d.Subsets) != 1 || d.Subsets[0] != "primeintellect" {
				t.Fatalf("run %s data %+v", r.ID, d)
			}
		case "dapo-math":
			if d.Language != "all" || d.TestPath != "" {
				t.Fatalf("run %s data %+v", r.ID, d)
			}
		}
	}
	if !seen["deepcoder"] || !seen["dapo-math"] {
		t.Fatalf("plan covers %v", seen)
	}
}

// fileTask is the base spec with matrix.tasks [task] and the tasks section
// appended.
func fileTask(task, section string) string {
	return strings.Replace(baseSpec, "tasks: [synth-math]", "tasks: ["+task+"]", 1) + section
}

// A file task takes its kind from its verifier, carries its mapping into
// the runs' data config (and so their config hash), and resolves its path
// against the spec file like the other file sources.
func TestFileTaskPlan(t *testing.T) {
	section := func(verifier, extra string) string {
		return fileTask("mine", "tasks:\n  mine:\n    source: file\n    path: data/mine.jsonl\n    file:\n      verifier: "+verifier+"\n      problem: text\n"+extra)
	}
	plan := func(text string) Run {
		t.Helper()
		s, err := Load(writeSpec(t, text))
		if err != nil {
			t.Fatal(err)
		}
		runs, err := Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		return runs[0]
	}
	m := plan(section("answer", "      answer: answer\n"))
	b := plan(section("boxed", "      answer: answer\n"))
	c := plan(section("code-tests", "      tests: test_list\n"))
	for _, tc := range []struct {
		r        Run
		kind     string
		verifier string
		maxIter  int
	}{{m, "math", "answer", 3}, {b, "math", "boxed", 3}, {c, "code", "code-tests", 2}} {
		d := tc.r.Config.Data
		if d.Kind != tc.kind || d.File == nil || d.File.Verifier != tc.verifier || tc.r.Config.WorkflowSet.MaxIterations != tc.maxIter {
			t.Errorf("%s: kind %s, file %+v, max_iterations %d; want %s, %s, %d", tc.verifier, d.Kind, d.File, tc.r.Config.WorkflowSet.MaxIterations, tc.kind, tc.verifier, tc.maxIter)
		}
		if !filepath.IsAbs(d.Path) || !strings.HasSuffix(d.Path, filepath.Join("data", "mine.jsonl")) {
			t.Errorf("%s: path %s not resolved against the spec file", tc.verifier, d.Path)
		}
	}
	if m.ConfigHash == b.ConfigHash || m.ConfigHash == c.ConfigHash {
		t.Errorf("the verifier does not enter the config hash")
	}
}
