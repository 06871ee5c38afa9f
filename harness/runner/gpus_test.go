package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/fake"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// gpuTracker is a fake engine driver on a machine with fake GPUs: it lists
// them as the driver's Devices and records, for every open engine, the
// devices it was pinned to, until it is closed.
type gpuTracker struct {
	gpus    []engine.Device
	barrier int // the first barrier opens wait until that many engines are open at once

	mu       sync.Mutex
	cond     *sync.Cond
	opened   int
	active   int
	maxAll   int
	onDevice map[string]int
	maxDev   map[string]int
	pins     [][]engine.Device
	problems []string
}

func newGPUTracker(n, barrier int) *gpuTracker {
	g := &gpuTracker{barrier: barrier, onDevice: map[string]int{}, maxDev: map[string]int{}}
	g.cond = sync.NewCond(&g.mu)
	for i := range n {
		g.gpus = append(g.gpus, engine.Device{ID: fmt.Sprint(i), Name: "Fake GPU"})
	}
	return g
}

func (g *gpuTracker) registry() *engine.Registry {
	reg := &engine.Registry{}
	err := reg.Register(engine.Driver{Name: "native", Version: "fake",
		Devices: func(context.Context, engine.Options) ([]engine.Device, error) { return g.gpus, nil },
		Open: func(_ context.Context, _ string, opt engine.Options) (engine.Engine, error) {
			g.open(opt.Devices)
			return &trackedEngine{Engine: fake.New(agents.Respond), close: func() { g.close(opt.Devices) }}, nil
		}})
	if err != nil {
		panic(err)
	}
	return reg
}

func (g *gpuTracker) open(devs []engine.Device) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pins = append(g.pins, devs)
	g.active++
	g.maxAll = max(g.maxAll, g.active)
	for _, d := range devs {
		g.onDevice[d.ID]++
		g.maxDev[d.ID] = max(g.maxDev[d.ID], g.onDevice[d.ID])
	}
	g.opened++
	if g.opened > g.barrier {
		return
	}
	// The first wave waits until it is all open: the pool must run that many
	// at once.
	deadline := time.Now().Add(20 * time.Second)
	go func() { time.Sleep(20 * time.Second); g.cond.Broadcast() }()
	for g.opened < g.barrier && time.Now().Before(deadline) {
		g.cond.Wait()
	}
	if g.opened < g.barrier {
		g.problems = append(g.problems, fmt.Sprintf("only %d of %d runs were open at once", g.opened, g.barrier))
	}
	g.cond.Broadcast()
}

func (g *gpuTracker) close(devs []engine.Device) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	for _, d := range devs {
		g.onDevice[d.ID]--
	}
}

type trackedEngine struct {
	engine.Engine
	close func()
	once  sync.Once
}

func (e *trackedEngine) Close() error {
	e.once.Do(e.close)
	return e.Engine.Close()
}

// gpuSpec is fakeSpec with three seeds: 12 runs.
func gpuSpec(t *testing.T) *spec.Spec {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fk.yaml")
	text := strings.Replace(fmt.Sprintf(fakeSpec, "0.05"), "seeds: [1]", "seeds: [1, 2, 3]", 1)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunsPinnedOnePerGPU runs 12 runs on machines with 1, 2 and 8 fake
// GPUs (and with --runs-per-gpu and --gpus-per-run): by default as many run
// at once as there are GPUs, each engine pinned to one GPU of its own, never
// two on one; every manifest records its device.
func TestRunsPinnedOnePerGPU(t *testing.T) {
	for _, tc := range []struct {
		gpus, perRun, perGPU int
		wantJobs, wantPin    int // runs at once, devices per run
		wantShare            int // most runs on one device at once
	}{
		{gpus: 1, wantJobs: 1, wantPin: 1, wantShare: 1},
		{gpus: 2, wantJobs: 2, wantPin: 1, wantShare: 1},
		{gpus: 8, wantJobs: 8, wantPin: 1, wantShare: 1},
		{gpus: 2, perGPU: 2, wantJobs: 4, wantPin: 1, wantShare: 2},
		{gpus: 8, perRun: 2, wantJobs: 4, wantPin: 2, wantShare: 1},
	} {
		t.Run(fmt.Sprintf("gpus=%d,per-run=%d,per-gpu=%d", tc.gpus, tc.perRun, tc.perGPU), func(t *testing.T) {
			s := gpuSpec(t)
			g := newGPUTracker(tc.gpus, tc.wantJobs)
			opt := fakeOptions(t.TempDir())
			opt.Jobs, opt.GPUsPerRun, opt.RunsPerGPU, opt.Engines = 0, tc.perRun, tc.perGPU, g.registry()
			pl, err := Place(context.Background(), s, opt)
			if err != nil {
				t.Fatal(err)
			}
			if pl.Jobs != tc.wantJobs || len(pl.GPUs) != tc.gpus {
				t.Fatalf("placement %d runs at once on %d GPUs, want %d on %d", pl.Jobs, len(pl.GPUs), tc.wantJobs, tc.gpus)
			}
			t.Log(pl.Describe())
			sum, err := Run(context.Background(), s, opt)
			if err != nil {
				t.Fatal(err)
			}
			if n := sum.Count(StateDone); n != 12 {
				t.Fatalf("%d of 12 runs done:\n%s", n, states(sum))
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, p := range g.problems {
				t.Error(p)
			}
			if g.maxAll != tc.wantJobs {
				t.Errorf("at most %d runs at once, want %d", g.maxAll, tc.wantJobs)
			}
			if len(g.pins) != 12 {
				t.Errorf("%d engines opened, want 12", len(g.pins))
			}
			for i, p := range g.pins {
				if len(p) != tc.wantPin {
					t.Errorf("engine %d pinned to %v, want %d devices", i, p, tc.wantPin)
				}
			}
			for id, n := range g.maxDev {
				if n > tc.wantShare {
					t.Errorf("GPU %s held %d runs at once, want at most %d", id, n, tc.wantShare)
				}
			}
			if len(g.maxDev) != tc.gpus {
				t.Errorf("%d of %d GPUs used", len(g.maxDev), tc.gpus)
			}
			for _, o := range sum.Outcomes {
				m, err := runlog.ReadManifest(o.Dir)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(m.Devices, "CUDA_VISIBLE_DEVICES=") || !strings.HasSuffix(m.Devices, fmt.Sprintf("(Fake GPU x%d)", tc.wantPin)) {
					t.Errorf("%s: manifest devices %q", o.ID, m.Devices)
				}
			}
		})
	}
}

// TestPlaceRefuses: --jobs above the GPUs, contradicting or impossible GPU
// flags, and GPU flags on a plan without GPUs are errors before anything
// runs; a plan whose engine lists no GPU runs --jobs (or one per core) at
// once as before, with no device in its manifests.
func TestPlaceRefuses(t *testing.T) {
	s := gpuSpec(t)
	for _, tc := range []struct {
		gpus, jobs, perRun, perGPU int
		want                       string
	}{
		{gpus: 2, jobs: 3, want: "--jobs 3: the runs use GPUs and 2 are visible (Fake GPU x2); at one run per GPU at most 2 runs execute at once"},
		{gpus: 8, jobs: 9, want: "pass --runs-per-gpu N"},
		{gpus: 2, jobs: 5, perGPU: 2, want: "at 2 runs per GPU at most 4 runs"},
		{gpus: 2, perRun: 3, want: "--gpus-per-run 3: only 2 GPUs are visible"},
		{gpus: 2, perRun: 2, perGPU: 2, want: "not both"},
		{gpus: 0, perGPU: 2, want: "no selected run uses a GPU"},
		{gpus: 1, perGPU: -1, want: "must not be negative"},
	} {
		opt := fakeOptions(t.TempDir())
		opt.Jobs, opt.GPUsPerRun, opt.RunsPerGPU, opt.Engines = tc.jobs, tc.perRun, tc.perGPU, newGPUTracker(tc.gpus, 0).registry()
		_, err := Place(context.Background(), s, opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc, err, tc.want)
		}
		if tc.jobs > 0 && tc.perRun == 0 && !errors.Is(err, ErrTooManyJobs) {
			t.Errorf("%+v: %v is not ErrTooManyJobs", tc, err)
		}
		if _, err := Run(context.Background(), s, opt); err == nil {
			t.Errorf("%+v: Run accepted it", tc)
		}
		if ents, _ := os.ReadDir(filepath.Join(opt.RunsDir, s.Experiment)); len(ents) > 1 { // only its .gitignore
			t.Errorf("%+v: %d entries written", tc, len(ents))
		}
	}

	// On the CPU: --jobs as given, one per core by default, no devices.
	opt := fakeOptions(t.TempDir())
	opt.Jobs = 3
	pl, err := Place(context.Background(), s, opt)
	if err != nil || pl.Jobs != 3 || pl.GPUs != nil || pl.Describe() != "" {
		t.Fatalf("CPU plan placed %+v, %v", pl, err)
	}
	sum, err := Run(context.Background(), s, opt)
	if err != nil || sum.Count(StateDone) != 12 {
		t.Fatalf("CPU plan: %v\n%s", err, states(sum))
	}
	for _, o := range sum.Outcomes {
		raw, _ := os.ReadFile(filepath.Join(o.Dir, runlog.ManifestFile))
		if strings.Contains(string(raw), `"devices"`) {
			t.Errorf("%s: a CPU run's manifest names devices", o.ID)
		}
	}
}
