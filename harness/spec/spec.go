// Package spec reads marlow experiment files: strict YAML parsing (unknown
// keys, wrong types and out-of-range values are errors that name the file
// line and key path), defaults for every optional knob, per-model and
// per-task overrides of the grpo and workflow sections, and the expansion
// of the matrix into runs with derived seeds and config hashes.
//
// Each section is one struct with a setDefaults method and a validation
// function; adding a section means adding those three things and a field
// to Spec. The reference of every key and default is seeds/README.md.
package spec

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/filetask"
	"github.com/marlowlab/marlow/harness/study"
	"gopkg.in/yaml.v3"
)

// Allowed values. The study's words come from their owners: package study
// (workflows, roles, conditions, loss modes, LoRA targets, engines) and
// package datasets (task sources and kinds).
var (
	Workflows   = study.Workflows
	Conditions  = study.Conditions
	Sources     = datasets.Sources
	Engines     = study.Engines
	Devices     = []string{"auto", "cuda", "cpu"}                    // torch engine devices
	DTypes      = []string{"auto", "float32", "bfloat16", "float16"} // torch engine dtypes
	GenBackends = []string{"reference", "slots"}                     // torch engine generation backends
	Roles       = study.Roles
	LoraTarget  = study.LoRATargets
	LossAggs    = study.LossAggs
	SourceKind  = datasets.SourceKind
	Schedules   = []string{"cosine", "constant"}
	AnswerMode  = []string{"answer", "boxed"}
	Operators   = []string{"+", "-", "*"}
)

// MaxSpecBytes bounds the size of a spec file.
const MaxSpecBytes = 1 << 20

// Spec is a parsed, defaulted and validated experiment file.
type Spec struct {
	Experiment string           `yaml:"experiment" json:"experiment"`
	MasterSeed uint64           `yaml:"master_seed" json:"master_seed"`
	Seeds      []int            `yaml:"seeds" json:"seeds"`
	Matrix     Matrix           `yaml:"matrix" json:"matrix"`
	Models     map[string]Model `yaml:"models" json:"models"`
	Tasks      map[string]Task  `yaml:"tasks" json:"tasks"`
	GRPO       GRPO             `yaml:"grpo" json:"grpo"`
	Workflow   WorkflowSettings `yaml:"workflow" json:"workflow"`
	Eval       Eval             `yaml:"eval" json:"eval"`
	Checkpoint Checkpoint       `yaml:"checkpoint" json:"checkpoint"`
	Analysis   Analysis         `yaml:"analysis" json:"analysis"`
	Pretrain   Pretrain         `yaml:"pretrain" json:"pretrain"`
	// Arms are named variants of the recipe planned next to the matrix
	// (arms.go).
	Arms map[string]Arm `yaml:"arms,omitempty" json:"arms,omitempty"`
	// Routings are declared routings of roles to adapters (routing.go),
	// which the matrix's and the arms' conditions may name beside the
	// built-in sp and ip.
	Routings map[string]study.Routing `yaml:"routings,omitempty" json:"routings,omitempty"`
	// WorkflowFiles are workflow declaration files (relative to the spec's
	// folder), whose workflows the matrix and arms may then name
	// (workflows.go).
	WorkflowFiles []string `yaml:"workflow_files,omitempty" json:"workflow_files,omitempty"`

	// File is the absolute path of the spec file.
	File string `yaml:"-" json:"-"`

	org origins // where each top-level key path was set

	pretrains map[string]Pretrain // per-scale pretrain sections, resolved by validate

	declared   []study.Workflow // the workflow files' declarations, in file order
	declFailed bool             // a workflow file failed to load
}

// PretrainFor returns the pretrain settings of a scale: the pretrain
// section with the model's own pretrain overrides applied.
func (s *Spec) PretrainFor(scale string) Pretrain {
	if p, ok := s.pretrains[scale]; ok {
		return p.Clone()
	}
	return s.Pretrain.Clone()
}

// Matrix is the grid of the study.
type Matrix struct {
	Workflows  []string `yaml:"workflows" json:"workflows"`
	Tasks      []string `yaml:"tasks" json:"tasks"`
	Scales     []string `yaml:"scales" json:"scales"`
	Conditions []string `yaml:"conditions" json:"conditions"`
}

// Model is the base model of one scale: a Hugging Face checkpoint folder or
// a tiny Qwen3 shape that `marlow pretrain` builds.
type Model struct {
	Engine     string `yaml:"engine" json:"engine"`
	Checkpoint string `yaml:"checkpoint,omitempty" json:"checkpoint,omitempty"`
	Tiny       *Tiny  `yaml:"tiny,omitempty" json:"tiny,omitempty"`
	// Torch engine settings (engine: torch only).
	Python      string `yaml:"python,omitempty" json:"python,omitempty"`             // interpreter; default $MARLOW_PYTHON, else python3
	Device      string `yaml:"device,omitempty" json:"device,omitempty"`             // cuda, cpu or auto (default)
	DType       string `yaml:"dtype,omitempty" json:"dtype,omitempty"`               // auto (default), float32, bfloat16, float16
	GenTokens   int    `yaml:"gen_tokens,omitempty" json:"gen_tokens,omitempty"`     // token budget of one generation wave
	TrainTokens int    `yaml:"train_tokens,omitempty" json:"train_tokens,omitempty"` // token budget of one training micro-batch
	// GenBackend is the torch server's generation backend: reference (the
	// batched KV-cache waves) or slots (paged KV pool, continuous refill);
	// "" is slots on cuda and reference on the CPU.
	GenBackend string `yaml:"gen_backend,omitempty" json:"gen_backend,omitempty"`
	// KVCacheFraction is the share of free cuda memory the slots backend's
	// KV pool takes (0 = 0.85).
	KVCacheFraction float64 `yaml:"kv_cache_fraction,omitempty" json:"kv_cache_fraction,omitempty"`
	// GRPO overrides grpo keys for runs of this scale.
	GRPO *yaml.Node `yaml:"grpo,omitempty" json:"-"`
	// Pretrain overrides pretrain keys for this scale's base model (a tiny
	// shape only): for example n_votes_mix, so that an n_votes arm starts
	// from a base model that has seen every candidate count.
	Pretrain *yaml.Node `yaml:"pretrain,omitempty" json:"-"`
}

func (m *Model) setDefaults() { m.Engine = study.Native }

// Tiny is the shape of a tiny Qwen3-architecture model. The vocabulary is
// the tokenizer's.
type Tiny struct {
	Hidden       int     `yaml:"hidden" json:"hidden"`
	Layers       int     `yaml:"layers" json:"layers"`
	Heads        int     `yaml:"heads" json:"heads"`
	KVHeads      int     `yaml:"kv_heads" json:"kv_heads"`
	HeadDim      int     `yaml:"head_dim" json:"head_dim"`
	Intermediate int     `yaml:"intermediate" json:"intermediate"`
	RopeTheta    float64 `yaml:"rope_theta" json:"rope_theta"`
	MaxPositions int     `yaml:"max_positions" json:"max_positions"`
}

func (t *Tiny) setDefaults() {
	*t = Tiny{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 192,
		RopeTheta: 10000, MaxPositions: 2048}
}

// Params is the parameter count of the shape with tied embeddings and the
// given vocabulary size (Qwen3 layout: q/k/v/o projections, q/k RMSNorm,
// SwiGLU MLP, two RMSNorms per layer, a final RMSNorm).
func (t Tiny) Params(vocab int) int64 {
	h, hd := int64(t.Hidden), int64(t.HeadDim)
	attn := h*int64(t.Heads)*hd*2 + h*int64(t.KVHeads)*hd*2 + 2*hd
	mlp := 3 * h * int64(t.Intermediate)
	layer := attn + mlp + 2*h
	return int64(vocab)*h + int64(t.Layers)*layer + h
}

// Task is the data of one task of the matrix.
type Task struct {
	Source     string  `yaml:"source" json:"source"`
	Path       string  `yaml:"path,omitempty" json:"path,omitempty"`
	TrainSize  int     `yaml:"train_size" json:"train_size"`
	ValSize    int     `yaml:"val_size" json:"val_size"`
	ValFrac    float64 `yaml:"val_frac,omitempty" json:"val_frac,omitempty"`
	SplitSeed  uint64  `yaml:"split_seed" json:"split_seed"`
	AnswerMode string  `yaml:"answer_mode,omitempty" json:"answer_mode,omitempty"`
	// Language keeps the dapo-math problems of one language (dapo.LangAll,
	// LangEN, LangCN).
	Language string `yaml:"language,omitempty" json:"language,omitempty"`
	// Subsets choose deepcoder subset folders of a dataset root
	// (deepcoder.Subsets); TestPath holds deepcoder test shards that become
	// the validation set.
	Subsets   []string   `yaml:"subsets,omitempty" json:"subsets,omitempty"`
	TestPath  string     `yaml:"test_path,omitempty" json:"test_path,omitempty"`
	SynthMath *SynthMath `yaml:"synth_math,omitempty" json:"synth_math,omitempty"`
	SynthCode *SynthCode `yaml:"synth_code,omitempty" json:"synth_code,omitempty"`
	// File maps the fields of a file source's rows (source file: a
	// researcher's own JSONL or Parquet file) and names its verifier.
	File *filetask.Mapping `yaml:"file,omitempty" json:"file,omitempty"`
	// GRPO and Workflow override those sections for runs of this task.
	GRPO     *yaml.Node `yaml:"grpo,omitempty" json:"-"`
	Workflow *yaml.Node `yaml:"workflow,omitempty" json:"-"`
}

func (t *Task) setDefaults() { t.ValSize = 200; t.SplitSeed = 1 }

// Kind is the task's kind: its source's, or for a file source its
// verifier's.
func (t Task) Kind() string {
	if t.Source == datasets.SourceFile && t.File != nil {
		return t.File.Kind()
	}
	return SourceKind[t.Source]
}

// SynthMath are the knobs of the synth-math generator
// (datasets/synthmath.Config).
type SynthMath struct {
	OperandsMin int      `yaml:"operands_min" json:"operands_min"`
	OperandsMax int      `yaml:"operands_max" json:"operands_max"`
	ValueMax    int      `yaml:"value_max" json:"value_max"` // operands are drawn from [1, value_max]
	Operators   []string `yaml:"operators" json:"operators"`
}

func (s *SynthMath) setDefaults() {
	*s = SynthMath{OperandsMin: 2, OperandsMax: 4, ValueMax: 9, Operators: []string{"+", "-", "*"}}
}

// SynthCode are the knobs of the synth-code generator
// (datasets/synthcode.Config).
type SynthCode struct {
	StagesMin     int     `yaml:"stages_min" json:"stages_min"` // operations per program, reducer included
	StagesMax     int     `yaml:"stages_max" json:"stages_max"`
	ReduceProb    float64 `yaml:"reduce_prob" json:"reduce_prob"` // chance a 2+ stage program ends in a reducer
	ValueMax      int     `yaml:"value_max" json:"value_max"`     // list elements are drawn from [0, value_max]
	ListMin       int     `yaml:"list_min" json:"list_min"`       // shortest test input list
	ListMax       int     `yaml:"list_max" json:"list_max"`
	ShownExamples int     `yaml:"shown_examples" json:"shown_examples"`
	HiddenTests   int     `yaml:"hidden_tests" json:"hidden_tests"`
}

func (s *SynthCode) setDefaults() {
	*s = SynthCode{StagesMin: 2, StagesMax: 3, ReduceProb: 0.6, ValueMax: 9, ListMin: 3, ListMax: 6,
		ShownExamples: 2, HiddenTests: 5}
}

// GRPO are the training settings.
type GRPO struct {
	Rollouts        int                `yaml:"rollouts" json:"rollouts"`
	ProblemsPerStep int                `yaml:"problems_per_step" json:"problems_per_step"`
	Steps           int                `yaml:"steps" json:"steps"`
	LR              float64            `yaml:"lr" json:"lr"`
	WarmupSteps     int                `yaml:"warmup_steps" json:"warmup_steps"`
	Schedule        string             `yaml:"schedule" json:"schedule"`
	MinLRRatio      float64            `yaml:"min_lr_ratio" json:"min_lr_ratio"`
	ClipLow         float64            `yaml:"clip_low" json:"clip_low"`
	ClipHigh        float64            `yaml:"clip_high" json:"clip_high"`
	LossAgg         string             `yaml:"loss_agg" json:"loss_agg"`
	Temperature     float64            `yaml:"temperature" json:"temperature"`
	MaxNewTokens    map[string]int     `yaml:"max_new_tokens" json:"max_new_tokens"`
	Lora            Lora               `yaml:"lora" json:"lora"`
	GradClip        float64            `yaml:"grad_clip" json:"grad_clip"`
	KLCoef          map[string]float64 `yaml:"kl_coef" json:"kl_coef"`
	Adam            Adam               `yaml:"adam" json:"adam"`
	SamplesPerStep  int                `yaml:"samples_per_step" json:"samples_per_step"`
	// Coherence turns on the coherence regularizer (I6) when set; absent
	// (the default) it is off and leaves the resolved config, and so its
	// hash, as it was before the option existed. Either way every run keeps
	// each role's gradient EMA and logs the cosine to it: without the
	// regularizer at ema_decay 0.9 (its default here,
	// engine.DefaultCoherenceEMADecay), measured and never applied.
	Coherence *Coherence `yaml:"coherence" json:"coherence,omitempty"`
}

// Coherence are the settings of the coherence regularizer: each role's
// gradient is scaled by 1 - lambda max(0, cos(g, EMA of the role's past
// gradients)) before the roles' gradients are summed (engine.Coherence);
// with form step the same factors multiply the optimizer's step instead
// (engine.CoherenceStep).
type Coherence struct {
	Lambda   float64 `yaml:"lambda" json:"lambda"`       // in (0, 1]; no default, the key is required
	EMADecay float64 `yaml:"ema_decay" json:"ema_decay"` // in [0, 1); default 0.9 (a window of about 10 steps)
	// Form is empty (absent: the paper's form, on the gradient) or "step"
	// (engine.CoherenceStep); absent, the resolved config and its hash are
	// as before the key existed.
	Form string `yaml:"form" json:"form,omitempty"`
}

func (c *Coherence) setDefaults() { *c = Coherence{EMADecay: 0.9} }

func (g *GRPO) setDefaults() {
	*g = GRPO{Rollouts: 8, ProblemsPerStep: 64, Steps: 500, LR: 2e-5, WarmupSteps: 15,
		Schedule: "cosine", MinLRRatio: 0, ClipLow: 0.2, ClipHigh: 0.28, LossAgg: "seq-mean-token-mean",
		Temperature: 0.7, MaxNewTokens: map[string]int{"default": 1024}, GradClip: 1.0,
		KLCoef: map[string]float64{}, SamplesPerStep: 8}
	g.Lora.setDefaults()
	g.Adam.setDefaults()
}

// MaxNewTokensFor returns the completion budget of a role.
func (g GRPO) MaxNewTokensFor(role string) int {
	if n, ok := g.MaxNewTokens[role]; ok {
		return n
	}
	return g.MaxNewTokens["default"]
}

// clone deep-copies the maps and slices so an override cannot alias them.
func (g GRPO) clone() GRPO {
	c := g
	c.MaxNewTokens = make(map[string]int, len(g.MaxNewTokens))
	for k, v := range g.MaxNewTokens {
		c.MaxNewTokens[k] = v
	}
	c.KLCoef = make(map[string]float64, len(g.KLCoef))
	for k, v := range g.KLCoef {
		c.KLCoef[k] = v
	}
	c.Lora.Targets = append([]string(nil), g.Lora.Targets...)
	if g.Coherence != nil {
		coh := *g.Coherence
		c.Coherence = &coh
	}
	return c
}

// Lora is the adapter shape.
type Lora struct {
	Rank    int      `yaml:"rank" json:"rank"`
	Alpha   float64  `yaml:"alpha" json:"alpha"`
	Targets []string `yaml:"targets" json:"targets"`
}

func (l *Lora) setDefaults() {
	*l = Lora{Rank: 64, Alpha: 32, Targets: append([]string(nil), LoraTarget...)}
}

// Adam are the AdamW settings.
type Adam struct {
	Beta1       float64 `yaml:"beta1" json:"beta1"`
	Beta2       float64 `yaml:"beta2" json:"beta2"`
	Eps         float64 `yaml:"eps" json:"eps"`
	WeightDecay float64 `yaml:"weight_decay" json:"weight_decay"`
}

func (a *Adam) setDefaults() { *a = Adam{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0} }

// WorkflowSettings are the knobs of the multi-agent workflows (the
// registry's type: a run's config and an episode's workflow.Config carry
// the same one). MaxIterations 0 means by task kind (3 math, 2 code),
// resolved in each run's config.
type WorkflowSettings = study.Settings

// DefaultWorkflowSettings returns the defaults of the workflow section.
func DefaultWorkflowSettings() WorkflowSettings { return WorkflowSettings{NVotes: 3, MaxSubtasks: 3} }

// ResolveWorkflowSettings returns w with an unset (0) max_iterations
// resolved by the task kind: 3 for math, 2 for code.
func ResolveWorkflowSettings(w WorkflowSettings, kind string) WorkflowSettings {
	if w.MaxIterations == 0 {
		w.MaxIterations = 3
		if kind == datasets.KindCode {
			w.MaxIterations = 2
		}
	}
	return w
}

// Eval is the validation schedule.
type Eval struct {
	Every          int  `yaml:"every" json:"every"`
	BeforeTraining bool `yaml:"before_training" json:"before_training"`
	// ValSize is how many validation problems each evaluation uses; 0 = all
	// of the task's validation split.
	ValSize int `yaml:"val_size" json:"val_size"`
	// FirstValSize is how many validation problems the first validation
	// (before training) uses, when more than ValSize (0: ValSize): its
	// samples cover them all, so what is measured at base (the supervisor
	// value the report's gate reads) rests on many problems, at the cost
	// of one validation; its evals rows, and every later validation, keep
	// to the first ValSize problems, so the accuracy curve is over one set.
	FirstValSize int `yaml:"first_val_size,omitempty" json:"first_val_size,omitempty"`
	// Samples is how many rollouts of the workflow each validation problem
	// gets; accuracies are then means over all of them (avg@k), which
	// halves the sampling noise of a comparison at k = 4 without needing
	// more held-out problems.
	Samples int `yaml:"samples" json:"samples"`
}

func (e *Eval) setDefaults() { *e = Eval{Every: 10, BeforeTraining: true, Samples: 1} }

// Checkpoint is the checkpoint cadence.
type Checkpoint struct {
	Every int `yaml:"every" json:"every"`
}

func (c *Checkpoint) setDefaults() { c.Every = 5 }

// Analysis are the parameters of the failure-mode detectors and statistics.
type Analysis struct {
	CliffAbs          float64 `yaml:"cliff_abs" json:"cliff_abs"`
	CliffRel          float64 `yaml:"cliff_rel" json:"cliff_rel"`
	AmpK              float64 `yaml:"amp_k" json:"amp_k"`
	AmpCos            float64 `yaml:"amp_cos" json:"amp_cos"`
	EarlyFrac         float64 `yaml:"early_frac" json:"early_frac"`
	CaptureFormatDrop float64 `yaml:"capture_format_drop" json:"capture_format_drop"`
	NGram             int     `yaml:"ngram" json:"ngram"`
	Bootstrap         int     `yaml:"bootstrap" json:"bootstrap"`
	BootstrapSeed     uint64  `yaml:"bootstrap_seed" json:"bootstrap_seed"`
	CI                float64 `yaml:"ci" json:"ci"`
}

func (a *Analysis) setDefaults() {
	*a = Analysis{CliffAbs: 0.10, CliffRel: 0.5, AmpK: 3.0, AmpCos: 0.5, EarlyFrac: 0.2,
		CaptureFormatDrop: 0.2, NGram: 3, Bootstrap: 1000, BootstrapSeed: 1, CI: 0.95}
}

func (s *Spec) setDefaults() {
	s.Models = map[string]Model{}
	s.Tasks = map[string]Task{}
	s.Arms = map[string]Arm{}
	s.GRPO.setDefaults()
	s.Workflow = DefaultWorkflowSettings()
	s.Eval.setDefaults()
	s.Checkpoint.setDefaults()
	s.Analysis.setDefaults()
	s.Pretrain.setDefaults()
}

// Load reads, defaults and validates the spec at path. Every problem found
// is reported in one *Error whose lines read `file:line: key.path: message`.
func Load(path string) (*Spec, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("spec %s: %w", path, err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("spec %s: read: %w", path, err)
	}
	if len(data) > MaxSpecBytes {
		return nil, fmt.Errorf("spec %s: larger than %d bytes", path, MaxSpecBytes)
	}
	return Parse(path, abs, data)
}

// Parse is Load on bytes: name is used in messages, abs is the file's
// absolute path (relative paths in the spec resolve against its folder).
func Parse(name, abs string, data []byte) (s *Spec, err error) {
	errs := &errList{file: name}
	defer func() {
		// The YAML library is not trusted never to panic on hostile input.
		if r := recover(); r != nil {
			s = nil
			err = fmt.Errorf("%s: cannot parse spec: %v", name, r)
		}
	}()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if err.Error() == "EOF" {
			errs.add(0, "", "file is empty")
			return nil, errs.err()
		}
		line, msg := syntaxError(data, err)
		errs.add(line, "", "%s", msg)
		return nil, errs.err()
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		errs.add(extra.Line, "", "more than one YAML document; a spec is one document")
		return nil, errs.err()
	}
	s = &Spec{File: abs, org: origins{}}
	s.setDefaults()
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		errs.add(root.Line, "", "a spec must be a mapping of sections, got %s", describe(root))
		return nil, errs.err()
	}
	d := &decoder{errs: errs}
	d.decode(root, reflect.ValueOf(s).Elem(), "", "", s.org)
	loadWorkflowFiles(s, checker{errs: errs, org: s.org})
	validate(s, root, errs)
	if err := errs.err(); err != nil {
		return nil, err
	}
	return s, nil
}

var lineRe = regexp.MustCompile(`line (\d+)`)

// yamlLine extracts the line number of a yaml.v3 syntax error.
func yamlLine(err error) int {
	m := lineRe.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n := 0
	for _, c := range m[1] {
		n = n*10 + int(c-'0')
		if n > 1<<30 {
			return 0
		}
	}
	return n
}

// ResolvedYAML renders the spec with every default filled in.
func (s *Spec) ResolvedYAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("spec: render resolved YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("spec: render resolved YAML: %w", err)
	}
	return buf.Bytes(), nil
}
