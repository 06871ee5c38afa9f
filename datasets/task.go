// Package datasets provides the study's task sources and their verifiers:
// the synthetic tasks of the CPU study (synth-math, synth-code), readers of
// the published DAPO-Math-17k and DeepCoder files, the DAPO answer rule, and
// sandboxed execution of generated code.
//
// Every source meets the Task contract: a deterministic, resumable train
// stream indexed by a cursor, a fixed validation set, and a verifier that
// grades an agent's output against a problem's ground truth.
package datasets

import "context"

// Kinds of task.
const (
	KindMath = "math"
	KindCode = "code"
)

// Task sources: the names a spec's tasks.<name>.source selects.
const (
	SourceSynthMath = "synth-math"
	SourceSynthCode = "synth-code"
	SourceDAPOMath  = "dapo-math"
	SourceDeepCoder = "deepcoder"
	// SourceFile reads a researcher's own JSONL or Parquet file
	// (datasets/filetask); its kind follows its verifier.
	SourceFile = "file"
)

// Sources lists the task sources.
var Sources = []string{SourceSynthMath, SourceSynthCode, SourceDAPOMath, SourceDeepCoder, SourceFile}

// SourceKind maps each task source of a fixed kind to its kind (a file
// source's kind follows its verifier).
var SourceKind = map[string]string{
	SourceSynthMath: KindMath,
	SourceSynthCode: KindCode,
	SourceDAPOMath:  KindMath,
	SourceDeepCoder: KindCode,
}

// Test is one input/output test of a code problem.
type Test struct {
	Input  string `json:"input"`
	Output string `json:"output"`
	// Functional tests call FnName with the JSON arguments in Input (one per
	// line) and compare against the JSON value in Output; stdin tests feed
	// Input on stdin and compare stdout.
	Functional bool `json:"functional,omitempty"`
}

// Problem is one task instance.
type Problem struct {
	ID       string // stable id, unique within the source
	Prompt   string // problem statement shown to the agents
	Truth    string // ground truth answer (math); canonical expected output summary (code)
	Solution string // teacher worked solution ending in the task's answer format (synthetic tasks)
	Tests    []Test // hidden tests (code)
	FnName   string // function name for functional tests (code)
	Starter  string // starter code (code)
}

// Verdict is the result of grading one output.
type Verdict struct {
	Correct bool
	Answer  string // the answer parsed from the output ("" when none was found)
	Reason  string // why it is incorrect, or "ok"
}

// Task is a source of problems with a verifier.
type Task interface {
	// Name is the source name used in specs and run ids, e.g. "synth-math".
	Name() string
	// Kind is KindMath or KindCode.
	Kind() string
	// Instructions tell an agent how to present its answer (e.g. "End with a
	// line `Answer: N`."); the workflows' prompt builders include them.
	Instructions() string
	// Train returns the problem at cursor i of the train stream; the stream
	// is unbounded (file sources cycle through reshuffled epochs).
	Train(i int64) (Problem, error)
	// Validation returns the fixed validation set.
	Validation() ([]Problem, error)
	// Verify grades an agent's output for problem p.
	Verify(ctx context.Context, p Problem, output string) Verdict
}
