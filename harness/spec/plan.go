package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/marlowlab/marlow/datasets/filetask"
	"github.com/marlowlab/marlow/harness/study"
)

// SeedVersion names the seed derivation function. Changing DeriveSeed
// requires a new version string, and new test vectors.
const SeedVersion = "marlow/seed/v1"

// DeriveSeed returns the seed of a run: the first 8 bytes, read as a
// big-endian uint64, of SHA-256("marlow/seed/v1" 0x00 <master in decimal>
// 0x00 <run key>). The run key is the run ID.
func DeriveSeed(master uint64, key string) uint64 {
	h := sha256.New()
	h.Write([]byte(SeedVersion))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatUint(master, 10)))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// ModelConfig is the resolved base model of a run.
type ModelConfig struct {
	Scale      string `json:"scale"`
	Engine     string `json:"engine"`
	Checkpoint string `json:"checkpoint,omitempty"` // absolute path of a Hugging Face folder
	Tiny       *Tiny  `json:"tiny,omitempty"`
	// Torch engine settings. Device and dtype change results and are part
	// of the config hash; the interpreter and the batching budgets are
	// machine settings and are not.
	Device      string `json:"device,omitempty"`
	DType       string `json:"dtype,omitempty"`
	Python      string `json:"-"`
	GenTokens   int    `json:"-"`
	TrainTokens int    `json:"-"`
	// GenBackend changes generated tokens (within float noise) and is part
	// of the hash when set; the KV pool's size is a machine setting.
	GenBackend      string  `json:"gen_backend,omitempty"`
	KVCacheFraction float64 `json:"-"`
	// Pretrain are the settings that build a tiny scale's base checkpoint;
	// they determine the run as much as the shape does, so they are part of
	// the config hash. Nil for checkpoint models.
	Pretrain *Pretrain `json:"pretrain,omitempty"`
}

// DataConfig is the resolved data of a run.
type DataConfig struct {
	Task       string     `json:"task"`
	Source     string     `json:"source"`
	Kind       string     `json:"kind"` // "math" or "code"
	Path       string     `json:"path,omitempty"`
	TrainSize  int        `json:"train_size"`         // 0 = unbounded (synth) or the whole file
	ValSize    int        `json:"val_size"`           // synth: validation problems; files: cap (0 = none)
	ValFrac    float64    `json:"val_frac,omitempty"` // files: validation share
	SplitSeed  uint64     `json:"split_seed"`
	AnswerMode string     `json:"answer_mode,omitempty"`
	Language   string     `json:"language,omitempty"`  // dapo-math
	Subsets    []string   `json:"subsets,omitempty"`   // deepcoder
	TestPath   string     `json:"test_path,omitempty"` // deepcoder: validation shards
	SynthMath  *SynthMath `json:"synth_math,omitempty"`
	SynthCode  *SynthCode `json:"synth_code,omitempty"`
	// File is a file source's field mapping and verifier.
	File *filetask.Mapping `json:"file,omitempty"`
}

// RunConfig is the fully resolved configuration of one run. Its canonical
// JSON (sorted keys, no insignificant whitespace) is hashed into the run's
// ConfigHash.
type RunConfig struct {
	ID            string   `json:"id"`
	Arm           string   `json:"arm,omitempty"`  // the spec arm; "" (absent) for the main matrix
	Workflow      string   `json:"workflow"`       // the workflow trained in ("single" for sa-rl)
	EvalWorkflows []string `json:"eval_workflows"` // sorted
	Condition     string   `json:"condition"`
	// Routing is the declared routing of the run (the condition is its
	// From); nil (absent) for the built-in routings, so the configs and
	// hashes of sp and ip runs are as before routings existed.
	Routing     *study.Routing `json:"routing,omitempty"`
	Train       bool           `json:"train"` // false for base (evaluation only)
	Task        string         `json:"task"`
	Scale       string         `json:"scale"`
	SeedIndex   int            `json:"seed_index"`
	Seed        uint64         `json:"seed"`
	SeedVersion string         `json:"seed_version"`
	// ValSeed keys validation sampling. Every run of one (task, scale,
	// seed) shares it, so base, sa-rl, sp and ip are validated with common
	// random numbers: at step 0, where all of them are the base policy, their
	// validations are identical; and since every evaluation of a run draws
	// the same numbers too, later differences come from training rather
	// than from sampling noise.
	ValSeed     uint64           `json:"val_seed"`
	Model       ModelConfig      `json:"model"`
	Data        DataConfig       `json:"data"`
	GRPO        GRPO             `json:"grpo"`
	WorkflowSet WorkflowSettings `json:"workflow_settings"` // MaxIterations resolved by task kind
	Eval        Eval             `json:"eval"`
	Checkpoint  Checkpoint       `json:"checkpoint"`
	Analysis    Analysis         `json:"analysis"`
	// Declarations are the workflow files' declarations of the workflows
	// the run trains or is evaluated in, in name order (absent when it
	// uses built-in workflows only): their text is part of the config.
	Declarations []Declaration `json:"workflow_declarations,omitempty"`
}

// Declaration is a workflow file's declaration as a run config records
// it: the workflow's name, the file's base name and its text.
type Declaration struct {
	Workflow string `json:"workflow"`
	File     string `json:"file"`
	Text     string `json:"text"`
}

// Run is one planned run.
type Run struct {
	ID            string    `json:"id"`
	Arm           string    `json:"arm,omitempty"`
	Workflow      string    `json:"workflow"`
	EvalWorkflows []string  `json:"eval_workflows"`
	Condition     string    `json:"condition"`
	Task          string    `json:"task"`
	Scale         string    `json:"scale"`
	SeedIndex     int       `json:"seed_index"`
	Seed          uint64    `json:"seed"`
	ConfigHash    string    `json:"config_hash"`
	Config        RunConfig `json:"config"`
}

// ValKey is the key from which a run's ValSeed is derived:
// "val/<task>/<scale>/seed<N>".
func ValKey(task, scale string, seed int) string {
	return fmt.Sprintf("val/%s/%s/seed%d", task, scale, seed)
}

// RunID returns the ID of a run: "sa-rl-<scale>-<task>-seed<N>" for sa-rl
// and "<workflow>-<condition>-<scale>-<task>-seed<N>" otherwise (a run of a
// declared routing has the routing's name as its condition); a run of an
// arm has "-<arm>" before "-seed<N>".
func RunID(workflow, condition, task, scale, arm string, seed int) string {
	if arm != "" {
		task += "-" + arm
	}
	if condition == study.SARL {
		return fmt.Sprintf("%s-%s-%s-seed%d", study.SARL, scale, task, seed)
	}
	return fmt.Sprintf("%s-%s-%s-%s-seed%d", workflow, condition, scale, task, seed)
}

// Plan expands the matrix, then each arm in name order, into runs. Within
// one grid runs are ordered by seed, task, scale (in the spec's order), then
// the sa-rl run of the cell, then workflow and condition in the spec's
// order. sa-rl is trained once per (task, scale, seed) on the single
// workflow and evaluated in single and in every workflow of its grid. For
// the single workflow, sp and ip would train exactly what sa-rl trains, so
// they are not planned; base runs are evaluation-only.
func Plan(s *Spec) ([]Run, error) {
	if s == nil {
		return nil, fmt.Errorf("spec: plan: nil spec")
	}
	errs := &errList{file: s.File}
	var runs []Run
	for _, arm := range s.ArmNames() {
		planned, err := planArm(s, arm, errs)
		if err != nil {
			return nil, err
		}
		runs = append(runs, planned...)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("spec %s: plan: the matrix plans no runs (workflows %v, conditions %v)",
			s.File, s.Matrix.Workflows, s.Matrix.Conditions)
	}
	seen := map[string]bool{}
	for _, r := range runs {
		if seen[r.ID] {
			return nil, fmt.Errorf("spec %s: plan: two runs share the ID %s", s.File, r.ID)
		}
		seen[r.ID] = true
	}
	return runs, nil
}

// ConfigHash is the hex SHA-256 of the canonical JSON of the part of a run
// config that determines the run's logs. Two things are left out so that a
// finished run stays reusable when they change: the analysis parameters
// (they only affect reports) and the directories of the data and checkpoint
// files (only their base names are hashed; their contents are pinned by
// SHA-256 in the manifest's provenance), so moving a checkout does not
// invalidate its runs.
func ConfigHash(rc RunConfig) (string, error) {
	rc.Analysis = Analysis{}
	if rc.Model.Checkpoint != "" {
		rc.Model.Checkpoint = filepath.Base(rc.Model.Checkpoint)
	}
	if rc.Data.Path != "" {
		rc.Data.Path = filepath.Base(rc.Data.Path)
	}
	b, err := CanonicalJSON(rc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalJSON encodes v as JSON with object keys sorted, no
// insignificant whitespace and no HTML escaping. Numbers keep the text
// encoding/json gives them.
func CanonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Counts returns the number of runs per condition, in Conditions order.
func Counts(runs []Run) []ConditionCount {
	n := map[string]int{}
	for _, r := range runs {
		n[r.Condition]++
	}
	var out []ConditionCount
	for _, c := range Conditions {
		if n[c] > 0 {
			out = append(out, ConditionCount{Condition: c, Runs: n[c]})
		}
	}
	return out
}

// ConditionCount is the number of runs of one condition.
type ConditionCount struct {
	Condition string `json:"condition"`
	Runs      int    `json:"runs"`
}

// pretrainOf returns the pretrain settings that build a tiny model, nil for
// a model read from a checkpoint.
func pretrainOf(s *Spec, scale string, m Model) *Pretrain {
	if m.Tiny == nil {
		return nil
	}
	p := s.PretrainFor(scale)
	return &p
}

// trains reports whether a condition runs GRPO (the registry's
// Condition.Trains; a name it does not hold counts as trained).
func trains(cond string) bool {
	c, ok := study.ConditionOf(cond)
	return !ok || c.Trains
}

// planArm expands the grid of one arm ("" is the main matrix) into runs.
func planArm(s *Spec, arm string, errs *errList) ([]Run, error) {
	mx := s.ArmMatrix(arm)
	var runs []Run
	sarl, _ := study.ConditionOf(study.SARL)
	evalAll := append([]string{sarl.TrainsIn}, mx.Workflows...)
	slices.Sort(evalAll)
	evalAll = slices.Compact(evalAll)
	for _, seed := range s.ArmSeeds(arm) {
		for _, task := range mx.Tasks {
			t, ok := s.Tasks[task]
			if !ok {
				return nil, fmt.Errorf("spec %s: plan: task %q has no definition (was the spec loaded with spec.Load?)", s.File, task)
			}
			for _, scale := range mx.Scales {
				m, ok := s.Models[scale]
				if !ok {
					return nil, fmt.Errorf("spec %s: plan: scale %q has no model", s.File, scale)
				}
				g, w, _, _ := s.cell(arm, task, scale, t, m, errs)
				if err := errs.err(); err != nil {
					return nil, err
				}
				w = ResolveWorkflowSettings(w, t.Kind())
				add := func(workflow, cond string, eval []string) error {
					id := RunID(workflow, cond, task, scale, arm, seed)
					routing := s.routing(cond)
					if routing != nil {
						cond = routing.From
					}
					rc := RunConfig{
						ID: id, Arm: arm, Workflow: workflow, EvalWorkflows: eval, Condition: cond, Routing: routing,
						Train: trains(cond), Task: task, Scale: scale, SeedIndex: seed,
						Seed: DeriveSeed(s.MasterSeed, id), SeedVersion: SeedVersion,
						ValSeed: DeriveSeed(s.MasterSeed, ValKey(task, scale, seed)),
						Model: ModelConfig{Scale: scale, Engine: m.Engine, Checkpoint: m.Checkpoint, Tiny: m.Tiny, Pretrain: pretrainOf(s, scale, m),
							Device: m.Device, DType: m.DType, Python: m.Python, GenTokens: m.GenTokens, TrainTokens: m.TrainTokens,
							GenBackend: m.GenBackend, KVCacheFraction: m.KVCacheFraction},
						Data: DataConfig{Task: task, Source: t.Source, Kind: t.Kind(), Path: t.Path,
							TrainSize: t.TrainSize, ValSize: t.ValSize, ValFrac: t.ValFrac, SplitSeed: t.SplitSeed, AnswerMode: t.AnswerMode,
							Language: t.Language, Subsets: append([]string(nil), t.Subsets...), TestPath: t.TestPath,
							SynthMath: t.SynthMath, SynthCode: t.SynthCode, File: t.File},
						GRPO: g.clone(), WorkflowSet: w, Eval: s.Eval, Checkpoint: s.Checkpoint, Analysis: s.Analysis,
						Declarations: s.declarationsOf(append([]string{workflow}, eval...)),
					}
					h, err := ConfigHash(rc)
					if err != nil {
						return fmt.Errorf("spec %s: plan %s: %w", s.File, id, err)
					}
					runs = append(runs, Run{ID: id, Arm: arm, Workflow: workflow, EvalWorkflows: eval, Condition: cond,
						Task: task, Scale: scale, SeedIndex: seed, Seed: rc.Seed, ConfigHash: h, Config: rc})
					return nil
				}
				if slices.Contains(mx.Conditions, study.SARL) {
					if err := add(sarl.TrainsIn, study.SARL, evalAll); err != nil {
						return nil, err
					}
				}
				for _, wf := range mx.Workflows {
					for _, cond := range mx.Conditions {
						// sa-rl is planned above; a trained condition in its
						// workflow would be the same run as sa-rl's
						if cond == study.SARL || (wf == sarl.TrainsIn && trains(cond)) {
							continue
						}
						if err := add(wf, cond, []string{wf}); err != nil {
							return nil, err
						}
					}
				}
			}
		}
	}
	return runs, nil
}
