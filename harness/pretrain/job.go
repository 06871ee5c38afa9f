package pretrain

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/spec"
)

// CodeVersion names the teacher and training code. Bump it whenever a
// change to this package, the workflow prompts or the native engine's
// training would change a checkpoint's bytes, so cached and committed
// checkpoints of the old code are no longer found.
const CodeVersion = "marlow/pretrain/v1"

// TaskConfig is one synthetic task of the pretraining corpus.
type TaskConfig struct {
	Name      string            `json:"name"`
	Source    string            `json:"source"` // "synth-math" or "synth-code"
	SynthMath *synthmath.Config `json:"synth_math,omitempty"`
	SynthCode *synthcode.Config `json:"synth_code,omitempty"`
}

// Open builds the task.
func (t TaskConfig) Open() (datasets.Task, error) {
	switch {
	case t.Source == synthmath.Name && t.SynthMath != nil:
		task, err := synthmath.New(*t.SynthMath)
		if err != nil {
			return nil, fmt.Errorf("pretrain: task %s: %w", t.Name, err)
		}
		return task, nil
	case t.Source == synthcode.Name && t.SynthCode != nil:
		task, err := synthcode.New(*t.SynthCode)
		if err != nil {
			return nil, fmt.Errorf("pretrain: task %s: %w", t.Name, err)
		}
		return task, nil
	}
	return nil, fmt.Errorf("pretrain: task %s: source %q has no synthetic configuration", t.Name, t.Source)
}

// Job is everything that determines one pretrained checkpoint.
type Job struct {
	Scale       string       `json:"-"` // the scale's name, for folder names and logs only
	Model       model.Config `json:"model"`
	Alphabet    string       `json:"alphabet"`
	Tasks       []TaskConfig `json:"tasks"` // sorted by name
	Pretrain    Config       `json:"pretrain"`
	NVotes      int          `json:"n_votes"`
	MaxSubtasks int          `json:"max_subtasks"`
}

// Steps is the job's optimizer step budget.
func (j Job) Steps() int { return j.Pretrain.StepsFor(j.Scale) }

// keyDoc is what Key hashes: the job with the budget resolved for its
// scale (so another scale's budget does not change this checkpoint's key)
// and without the validation sizes, which do not touch the train stream.
type keyDoc struct {
	Version     string       `json:"version"`
	Model       model.Config `json:"model"`
	Alphabet    string       `json:"alphabet"`
	Tasks       []TaskConfig `json:"tasks"`
	Pretrain    Config       `json:"pretrain"`
	NVotes      int          `json:"n_votes"`
	MaxSubtasks int          `json:"max_subtasks"`
	// Corpus is the SHA-256 of the first DigestTranscripts transcripts, so
	// a change of the workflow prompts, the task generators or the teacher
	// changes the key even when no setting does.
	Corpus string `json:"corpus_digest"`
}

// DigestTranscripts is how many transcripts the corpus digest covers.
const DigestTranscripts = 256

// CorpusDigest hashes the job's first DigestTranscripts transcripts
// (task, role, prompt messages and completion, length-prefixed).
func (j Job) CorpusDigest() (string, error) {
	teacher, err := j.NewTeacher()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	put := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for i := int64(0); i < DigestTranscripts; i++ {
		tr, err := teacher.Transcript(i)
		if err != nil {
			return "", err
		}
		put(tr.Task)
		put(tr.Role)
		for _, m := range tr.Prompt {
			put(m.Role)
			put(m.Content)
		}
		put(tr.Completion)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (j Job) keyDoc() (keyDoc, error) {
	p := j.Pretrain.Clone()
	p.Steps = map[string]int{"default": j.Steps()}
	tasks := make([]TaskConfig, len(j.Tasks))
	for i, t := range j.Tasks {
		if t.SynthMath != nil {
			c := *t.SynthMath
			c.ValSize = 0
			t.SynthMath = &c
		}
		if t.SynthCode != nil {
			c := *t.SynthCode
			c.ValSize = 0
			t.SynthCode = &c
		}
		tasks[i] = t
	}
	digest, err := j.CorpusDigest()
	if err != nil {
		return keyDoc{}, err
	}
	return keyDoc{Version: CodeVersion, Model: j.Model, Alphabet: j.Alphabet, Tasks: tasks,
		Pretrain: p, NVotes: j.NVotes, MaxSubtasks: j.MaxSubtasks, Corpus: digest}, nil
}

// KeyJSON is the canonical description of the checkpoint that Key hashes;
// it is stored next to the checkpoint as pretrain.json.
func (j Job) KeyJSON() ([]byte, error) {
	doc, err := j.keyDoc()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("pretrain: encode job: %w", err)
	}
	return append(b, '\n'), nil
}

// Key is the SHA-256 (hex) of KeyJSON: the content hash of everything that
// determines the checkpoint.
func (j Job) Key() (string, error) {
	b, err := j.KeyJSON()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}

// DirName is the folder name of the checkpoint under seeds/models:
// "<scale>-<first 12 hex digits of the key>".
func (j Job) DirName() (string, error) {
	k, err := j.Key()
	if err != nil {
		return "", err
	}
	return j.Scale + "-" + k[:12], nil
}

// KeySettings names the workflow settings of spec s that enter the
// pretraining key of a tiny scale and differ from their defaults, as
// "n_votes 5 (default 3)": a run with such a setting starts from another
// base model than one at the defaults. n_votes does not count when the
// scale's pretraining sets n_votes_mix (the mix replaces it).
func KeySettings(s *spec.Spec, scale string) []string {
	def := spec.DefaultWorkflowSettings()
	var out []string
	if len(s.PretrainFor(scale).NVotesMix) == 0 && s.Workflow.NVotes != def.NVotes {
		out = append(out, fmt.Sprintf("n_votes %d (default %d)", s.Workflow.NVotes, def.NVotes))
	}
	if s.Workflow.MaxSubtasks != def.MaxSubtasks {
		out = append(out, fmt.Sprintf("max_subtasks %d (default %d)", s.Workflow.MaxSubtasks, def.MaxSubtasks))
	}
	return out
}

// Validate checks the job's pieces.
func (j Job) Validate() error {
	if err := j.Model.Validate(); err != nil {
		return fmt.Errorf("pretrain: scale %s: %w", j.Scale, err)
	}
	if err := j.Pretrain.Validate(); err != nil {
		return err
	}
	if len(j.Tasks) == 0 {
		return fmt.Errorf("pretrain: scale %s: no synthetic tasks to pretrain on", j.Scale)
	}
	if _, err := model.NewCharTokenizer(j.Alphabet); err != nil {
		return fmt.Errorf("pretrain: scale %s: %w", j.Scale, err)
	}
	return nil
}

// OpenTasks builds the job's tasks, in order.
func (j Job) OpenTasks() ([]datasets.Task, error) {
	out := make([]datasets.Task, len(j.Tasks))
	for i, t := range j.Tasks {
		task, err := t.Open()
		if err != nil {
			return nil, err
		}
		out[i] = task
	}
	return out, nil
}

// NewTeacher returns the job's teacher.
func (j Job) NewTeacher() (*Teacher, error) {
	tasks, err := j.OpenTasks()
	if err != nil {
		return nil, err
	}
	return NewTeacher(j.Pretrain, tasks, j.NVotes, j.MaxSubtasks)
}

// TinyModel turns a tiny shape of the spec into a Qwen3 config with tied
// embeddings over a tokenizer of vocab ids whose end-of-turn token is eos.
func TinyModel(t spec.Tiny, vocab int, eos int) model.Config {
	e := eos
	return model.Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: model.ModelTypeQwen3,
		HiddenSize: t.Hidden, IntermediateSize: t.Intermediate, NumHiddenLayers: t.Layers,
		NumAttentionHeads: t.Heads, NumKeyValueHeads: t.KVHeads, HeadDim: t.HeadDim,
		RMSNormEps: 1e-6, RopeTheta: t.RopeTheta, VocabSize: vocab,
		MaxPositionEmbeddings: t.MaxPositions, TieWordEmbeddings: true,
		TorchDtype: "float32", EOSTokenID: &e,
	}
}

// SynthTaskConfig maps a spec task of a synthetic source to the task's own
// configuration: the split seed seeds the generator, the validation size
// carries over, and the difficulty knobs map one to one.
func SynthTaskConfig(name string, t spec.Task) (TaskConfig, error) {
	tc := TaskConfig{Name: name, Source: t.Source}
	switch t.Source {
	case synthmath.Name:
		c := synthmath.DefaultConfig()
		c.Seed, c.ValSize = t.SplitSeed, t.ValSize
		if m := t.SynthMath; m != nil {
			c = m.Config(t.SplitSeed, t.ValSize)
		}
		if err := c.Validate(); err != nil {
			return tc, fmt.Errorf("tasks.%s: %w", name, err)
		}
		tc.SynthMath = &c
	case synthcode.Name:
		c := synthcode.DefaultConfig()
		c.Seed, c.ValSize = t.SplitSeed, t.ValSize
		if m := t.SynthCode; m != nil {
			c = m.Config(t.SplitSeed, t.ValSize)
		}
		if err := c.Validate(); err != nil {
			return tc, fmt.Errorf("tasks.%s: %w", name, err)
		}
		tc.SynthCode = &c
	default:
		return tc, fmt.Errorf("tasks.%s: source %q is not synthetic", name, t.Source)
	}
	return tc, nil
}

// FromSpec returns the pretraining job of one tiny scale of a spec. The
// corpus covers both synthetic tasks whatever the matrix holds, so that
// specs sharing a shape and task knobs share checkpoints: every spec task of
// a synthetic source (sorted by name), and a source's defaults where the
// spec has no task of it. cfg is the pretraining configuration (the spec's
// pretrain section).
func FromSpec(s *spec.Spec, scale string, cfg Config) (Job, error) {
	if s == nil {
		return Job{}, fmt.Errorf("pretrain: nil spec")
	}
	m, ok := s.Models[scale]
	if !ok {
		return Job{}, fmt.Errorf("pretrain: spec %s has no model for scale %q", s.File, scale)
	}
	if m.Tiny == nil {
		return Job{}, fmt.Errorf("pretrain: scale %s of spec %s is a checkpoint (%s), not a tiny shape; nothing to pretrain", scale, s.File, m.Checkpoint)
	}
	alphabet := model.DefaultAlphabet()
	tok, err := model.NewCharTokenizer(alphabet)
	if err != nil {
		return Job{}, fmt.Errorf("pretrain: %w", err)
	}
	j := Job{Scale: scale, Model: TinyModel(*m.Tiny, tok.VocabSize(), int(tok.ID(model.ImEnd))),
		Alphabet: alphabet, Pretrain: cfg.Clone(), NVotes: s.Workflow.NVotes, MaxSubtasks: s.Workflow.MaxSubtasks}
	if len(cfg.NVotesMix) > 0 {
		// the mix replaces workflow.n_votes, so that specs differing only
		// in n_votes share the checkpoint
		j.NVotes = 0
	}
	names := slices.Sorted(maps.Keys(s.Tasks))
	have := map[string]bool{}
	for _, n := range names {
		t := s.Tasks[n]
		if t.Source != synthmath.Name && t.Source != synthcode.Name {
			continue
		}
		tc, err := SynthTaskConfig(n, t)
		if err != nil {
			return Job{}, fmt.Errorf("pretrain: spec %s: %w", s.File, err)
		}
		j.Tasks = append(j.Tasks, tc)
		have[t.Source] = true
	}
	for _, src := range []string{synthcode.Name, synthmath.Name} {
		if have[src] {
			continue
		}
		t, err := defaultSpecTask(src)
		if err != nil {
			return Job{}, err
		}
		tc, err := SynthTaskConfig(src, t)
		if err != nil {
			return Job{}, fmt.Errorf("pretrain: default task %s: %w", src, err)
		}
		j.Tasks = append(j.Tasks, tc)
	}
	sort.Slice(j.Tasks, func(a, b int) bool { return j.Tasks[a].Name < j.Tasks[b].Name })
	if err := j.Validate(); err != nil {
		return Job{}, err
	}
	return j, nil
}

// defaultDoc is the smallest valid spec; parsing it gives the spec
// package's defaults of every section.
const defaultDoc = `experiment: defaults
seeds: [1]
matrix:
  workflows: [single]
  tasks: [synth-math, synth-code]
  scales: [s]
  conditions: [base]
models:
  s:
    tiny: {hidden: 8, layers: 1, heads: 1, kv_heads: 1, head_dim: 8, intermediate: 8}
`

var defaults struct {
	once sync.Once
	spec *spec.Spec
	err  error
}

// defaultSpec returns the parsed defaults spec.
func defaultSpec() (*spec.Spec, error) {
	defaults.once.Do(func() {
		defaults.spec, defaults.err = spec.Parse("defaults.yaml", "/defaults.yaml", []byte(defaultDoc))
		if defaults.err != nil {
			defaults.err = fmt.Errorf("pretrain: the built-in defaults spec: %w", defaults.err)
		}
	})
	return defaults.spec, defaults.err
}

// defaultSpecTask returns the spec's defaults of a synthetic source.
func defaultSpecTask(source string) (spec.Task, error) {
	s, err := defaultSpec()
	if err != nil {
		return spec.Task{}, err
	}
	return s.Tasks[source], nil
}
