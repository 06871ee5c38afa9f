package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/spec"
)

// ErrTooManyJobs is returned (wrapped) when --jobs asks for more runs at
// once than the GPUs of a plan's runs hold.
var ErrTooManyJobs = errors.New("more runs at once than GPUs")

// Placement says how many runs execute at once and, for runs on GPUs, which
// GPUs each may use: by default one run per GPU, each run's engine pinned to
// its own device (CUDA_VISIBLE_DEVICES); GPUsPerRun gives each run several,
// RunsPerGPU puts several runs on each.
type Placement struct {
	// GPUs are the GPUs the plan's GPU runs see (nil when no run uses one).
	GPUs []engine.Device
	// Slots are the device sets of the GPU runs that execute at once.
	Slots [][]engine.Device
	// Jobs is the number of runs executed at once.
	Jobs int
	// onGPU holds the ids of the runs that take a slot.
	onGPU map[string]bool
}

// OnGPU reports whether run id takes a GPU slot.
func (p Placement) OnGPU(id string) bool { return p.onGPU[id] }

// Describe is the placement in words, e.g. "8 GPUs (NVIDIA H200 x8): one
// run per GPU, 8 runs at once"; "" for a plan on the CPU.
func (p Placement) Describe() string {
	if len(p.GPUs) == 0 {
		return ""
	}
	per, share := len(p.Slots[0]), 0
	for _, s := range p.Slots {
		if s[0].ID == p.Slots[0][0].ID {
			share++
		}
	}
	how := "one run per GPU"
	switch {
	case per > 1:
		how = fmt.Sprintf("%d GPUs per run", per)
	case share > 1:
		how = fmt.Sprintf("%d runs per GPU", share)
	}
	return fmt.Sprintf("%d %s (%s): %s, %d %s at once", len(p.GPUs), plural(len(p.GPUs), "GPU", "GPUs"), gpuNames(p.GPUs), how, p.Jobs, plural(p.Jobs, "run", "runs"))
}

// gpuNames counts the devices by name: "NVIDIA H200 x8".
func gpuNames(devs []engine.Device) string {
	var order []string
	n := map[string]int{}
	for _, d := range devs {
		name := d.Name
		if name == "" {
			name = "unnamed"
		}
		if n[name] == 0 {
			order = append(order, name)
		}
		n[name]++
	}
	parts := make([]string, len(order))
	for i, name := range order {
		parts[i] = fmt.Sprintf("%s x%d", name, n[name])
	}
	return strings.Join(parts, ", ")
}

// devicesText is what a run's manifest records of its pinned devices.
func devicesText(devs []engine.Device) string {
	if len(devs) == 0 {
		return ""
	}
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = d.ID
	}
	return fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s (%s)", strings.Join(ids, ","), gpuNames(devs))
}

// Place plans s, selects the runs matching opt.Only, checks what they need
// as Run does (a missing engine, interpreter, checkpoint or data file is the
// same error), and decides where they go (see Placement): it asks each
// engine the runs name for the GPUs it would use (its driver's Devices),
// and refuses opt.Jobs above what the GPUs hold. A plan whose runs use no
// GPU runs opt.Jobs at once (one per core when 0), as before GPUs were
// placed. It writes nothing.
func Place(ctx context.Context, s *spec.Spec, opt Options) (Placement, error) {
	planned, err := spec.Plan(s)
	if err != nil {
		return Placement{}, err
	}
	runs, err := Select(planned, opt.Only)
	if err != nil {
		return Placement{}, err
	}
	if err := checkNeeds(ctx, opt.Engines, runs, opt.Task); err != nil {
		return Placement{}, err
	}
	return place(ctx, opt, runs)
}

func place(ctx context.Context, opt Options, runs []spec.Run) (Placement, error) {
	p := Placement{onGPU: map[string]bool{}}
	byKey := map[string][]engine.Device{}
	for _, r := range runs {
		m := r.Config.Model
		eo := engineOptions(m, 1)
		key := strings.Join([]string{m.Engine, eo.Python, eo.Device}, "\x00")
		devs, seen := byKey[key]
		if !seen {
			d, err := opt.Engines.Driver(m.Engine)
			if err == nil && d.Devices != nil {
				if devs, err = d.Devices(ctx, eo); err != nil {
					return Placement{}, fmt.Errorf("run %s: engine %s: %w", r.ID, m.Engine, err)
				}
			}
			byKey[key] = devs
		}
		if len(devs) == 0 {
			continue
		}
		p.onGPU[r.ID] = true
		if p.GPUs == nil {
			p.GPUs = devs
		} else if !sameDevices(p.GPUs, devs) {
			return Placement{}, fmt.Errorf("run %s: engine %s sees the GPUs %s, other runs of the plan %s; give every run the same python", r.ID, m.Engine, devicesText(devs), devicesText(p.GPUs))
		}
	}
	per, share := opt.GPUsPerRun, opt.RunsPerGPU
	if per < 0 || share < 0 {
		return Placement{}, fmt.Errorf("--gpus-per-run %d and --runs-per-gpu %d must not be negative", per, share)
	}
	if len(p.GPUs) == 0 {
		if per > 0 || share > 0 {
			return Placement{}, errors.New("--gpus-per-run and --runs-per-gpu place runs on GPUs, but no selected run uses a GPU (no GPU is visible, or every run is on the cpu)")
		}
		p.Jobs = opt.Jobs
		if p.Jobs <= 0 {
			p.Jobs = runtime.NumCPU()
		}
		return p, nil
	}
	if per > 1 && share > 1 {
		return Placement{}, fmt.Errorf("--gpus-per-run %d and --runs-per-gpu %d: give each run several GPUs or put several runs on each GPU, not both", per, share)
	}
	per, share = max(per, 1), max(share, 1)
	if per > len(p.GPUs) {
		return Placement{}, fmt.Errorf("--gpus-per-run %d: only %d GPUs are visible (%s)", per, len(p.GPUs), gpuNames(p.GPUs))
	}
	if per > 1 {
		for i := 0; i+per <= len(p.GPUs); i += per {
			p.Slots = append(p.Slots, p.GPUs[i:i+per])
		}
	} else {
		for range share {
			for i := range p.GPUs {
				p.Slots = append(p.Slots, p.GPUs[i:i+1])
			}
		}
	}
	p.Jobs = len(p.Slots)
	if opt.Jobs > len(p.Slots) {
		how := "one run per GPU"
		if per > 1 {
			how = fmt.Sprintf("%d GPUs per run", per)
		} else if share > 1 {
			how = fmt.Sprintf("%d runs per GPU", share)
		}
		return Placement{}, fmt.Errorf("--jobs %d: the runs use GPUs and %d are visible (%s); at %s at most %d runs execute at once (runs sharing a GPU share its memory and run out of it): lower --jobs, or pass --runs-per-gpu N to put N runs on each GPU: %w",
			opt.Jobs, len(p.GPUs), gpuNames(p.GPUs), how, len(p.Slots), ErrTooManyJobs)
	}
	if opt.Jobs > 0 {
		p.Jobs = opt.Jobs
	}
	return p, nil
}

func sameDevices(a, b []engine.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID {
			return false
		}
	}
	return true
}
