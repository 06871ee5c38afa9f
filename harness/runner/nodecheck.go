package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// NodeCheckFile is the name of the file `marlow bench node` writes into the
// runs folder and `marlow plan` reads from there.
const NodeCheckFile = "gpu-check.json"

// NodeCheckVersion is the version of the NodeCheck layout.
const NodeCheckVersion = 1

// NodeCheck is what `marlow bench node` measured on a node: the checks it ran
// and the throughput of the torch engine on one checkpoint.
type NodeCheck struct {
	Version int `json:"version"`
	// GPU names the device measured ("NVIDIA H200"; "CPU <model>" on the
	// CPU), Device and DType the torch settings it ran with.
	GPU    string `json:"gpu"`
	Device string `json:"device"`
	DType  string `json:"dtype"`
	Date   string `json:"date"` // UTC, YYYY-MM-DD
	Time   string `json:"time"` // UTC, RFC 3339
	Commit string `json:"commit"`
	// Checkpoint is the folder measured and Params its parameter count.
	Checkpoint string  `json:"checkpoint"`
	Params     float64 `json:"params"`
	// Generate is generation by backend (reference, slots); Train the
	// GRPO LoRA step.
	Generate map[string]Rate `json:"generate"`
	Train    Rate            `json:"train"`
	// CUDAPeakBytes is the largest torch.cuda.max_memory_allocated of the
	// servers measured (0 on the CPU); ServerPeakRSSBytes their largest
	// resident set.
	CUDAPeakBytes      int64 `json:"cuda_peak_bytes"`
	ServerPeakRSSBytes int64 `json:"server_peak_rss_bytes"`
	// Steps are the checks in the order run.
	Steps []NodeCheckStep `json:"steps"`
}

// Rate is one throughput measurement.
type Rate struct {
	TokS     float64 `json:"tok_s"`
	Tokens   int64   `json:"tokens"`
	Seconds  float64 `json:"seconds"`
	Workload string  `json:"workload"`
}

// NodeCheckStep is one check of `marlow bench node`.
type NodeCheckStep struct {
	Name    string  `json:"name"`
	OK      bool    `json:"ok"`
	Seconds float64 `json:"seconds"`
	Detail  string  `json:"detail"`
}

// GenTokS is the measured generation throughput of a backend ("" is the
// torch engine's default on cuda, slots), 0 when it was not measured.
func (c *NodeCheck) GenTokS(backend string) float64 {
	if backend == "" {
		backend = "slots"
	}
	return c.Generate[backend].TokS
}

// Failed lists the names of the steps that failed.
func (c *NodeCheck) Failed() []string {
	var out []string
	for _, s := range c.Steps {
		if !s.OK {
			out = append(out, s.Name)
		}
	}
	return out
}

// WriteNodeCheck writes c to path as indented JSON.
func WriteNodeCheck(path string, c *NodeCheck) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("node check: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("node check: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("node check: %w", err)
	}
	return nil
}

// ReadNodeCheck reads a file WriteNodeCheck wrote. A missing file is
// (nil, nil); a file that is not a node check of this version is an error
// that says how to make a new one.
func ReadNodeCheck(path string) (*NodeCheck, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node check %s: %w", path, err)
	}
	var c NodeCheck
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("node check %s: %w (run marlow bench node again, or remove the file)", path, err)
	}
	if c.Version != NodeCheckVersion {
		return nil, fmt.Errorf("node check %s: version %d, this marlow reads version %d (run marlow bench node again, or remove the file)", path, c.Version, NodeCheckVersion)
	}
	if c.GPU == "" || c.Date == "" || !(c.Params > 0) {
		return nil, fmt.Errorf("node check %s: no gpu, date or params (run marlow bench node again, or remove the file)", path)
	}
	return &c, nil
}

// BaseLengths reads the mean completion length of every role from the
// validation turns of the finished base runs of plan under runsDir, by
// scale and task, and says in words where they came from ("" when no base
// run has finished). Runs not finished, or not there, are skipped.
func BaseLengths(runsDir, experiment string, plan []spec.Run) (map[CellKey]RoleLengths, string, error) {
	type acc struct {
		sum float64
		n   int
	}
	sums := map[CellKey]map[string]*acc{}
	var used []string
	cells := map[CellKey]bool{}
	for _, r := range plan {
		if r.Condition != "base" || r.Config.Model.Tiny != nil {
			continue
		}
		dir := RunDir(runsDir, experiment, r.ID)
		m, err := runlog.ReadManifest(dir)
		if err != nil || m.Status != runlog.StatusDone {
			continue
		}
		run, err := runlog.ReadRun(dir)
		if err != nil {
			return nil, "", fmt.Errorf("turn lengths from %s: %w", dir, err)
		}
		k := CellKey{r.Scale, r.Task}
		if sums[k] == nil {
			sums[k] = map[string]*acc{}
		}
		for _, s := range run.Samples {
			if s.Split != "val" || s.Role == "final" {
				continue
			}
			a := sums[k][s.Role]
			if a == nil {
				a = &acc{}
				sums[k][s.Role] = a
			}
			a.sum += float64(s.Tokens)
			a.n++
		}
		used = append(used, r.ID)
		cells[k] = true
	}
	if len(used) == 0 {
		return nil, "", nil
	}
	out := map[CellKey]RoleLengths{}
	for k, roles := range sums {
		out[k] = RoleLengths{}
		for role, a := range roles {
			out[k][role] = RoleLength{a.sum / float64(max(a.n, 1)), a.n}
		}
	}
	var names []string
	for k := range cells {
		names = append(names, k.Scale+"-"+k.Task)
	}
	slices.Sort(names)
	runsWord := "runs"
	if len(used) == 1 {
		runsWord = "run"
	}
	return out, fmt.Sprintf("measured: mean completion of each role in %d finished base %s under %s (%s; the base model's lengths, RL changes them); other cells stated: %.0f%% of max_new_tokens",
		len(used), runsWord, filepath.Join(runsDir, experiment), strings.Join(names, ", "), 100*StatedCompletionShare), nil
}
