package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/marlowlab/marlow/harness/bench"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/enginecheck"
	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
)

// compileSmoke is the compile smoke of marlow bench node, run by the torch
// engine's interpreter with the device as its argument: where the C
// compiler and the Python headers that torch.compile's Inductor builds
// with are, whether Triton (Inductor's GPU code generator) imports, and a
// small function compiled with torch.compile, run and compared with its
// eager result. It prints one JSON object.
const compileSmoke = `
import json, os, shutil, sys, sysconfig, time
dev = sys.argv[1]
out = {}
cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "").split()
out["cc"] = (shutil.which(cc[0]) if cc else None) or shutil.which("cc") or shutil.which("gcc") or ""
inc = os.path.join(sysconfig.get_paths().get("include", ""), "Python.h")
out["python_h"] = inc if os.path.exists(inc) else ""
try:
    import triton
    out["triton"] = triton.__version__
except Exception as e:
    out["triton"] = ""
    out["triton_error"] = repr(e)[:500]
import torch
def f(x, y):
    return torch.nn.functional.silu(x) * y + x.sum(-1, keepdim=True)
t0 = time.time()
try:
    x = torch.randn(64, 64, device=dev)
    y = torch.randn(64, 64, device=dev)
    got = torch.compile(f, dynamic=False)(x, y)
    out["compile_diff"] = float((got - f(x, y)).abs().max())
except Exception as e:
    out["compile_error"] = repr(e)[:2000]
out["compile_seconds"] = time.time() - t0
print(json.dumps(out))
`

// smokeResult is compileSmoke's output.
type smokeResult struct {
	CC             string  `json:"cc"`
	PythonH        string  `json:"python_h"`
	Triton         string  `json:"triton"`
	TritonError    string  `json:"triton_error"`
	CompileDiff    float64 `json:"compile_diff"`
	CompileError   string  `json:"compile_error"`
	CompileSeconds float64 `json:"compile_seconds"`
}

// judge says what of the smoke failed on device ("" when nothing did).
func (r smokeResult) judge(device string) []string {
	var bad []string
	if r.CC == "" {
		bad = append(bad, "no C compiler (cc, gcc or $CC) on PATH: torch.compile's Inductor needs one (install gcc)")
	}
	if r.PythonH == "" {
		bad = append(bad, "no Python.h for this interpreter: Inductor builds against the Python headers (install python3-dev or the matching package)")
	}
	if device == "cuda" && r.Triton == "" {
		bad = append(bad, "triton does not import ("+r.TritonError+"): Inductor generates its GPU kernels with it (pip install the triton that matches torch)")
	}
	switch {
	case r.CompileError != "":
		bad = append(bad, "torch.compile failed: "+r.CompileError)
	case r.CompileDiff > 1e-4:
		bad = append(bad, fmt.Sprintf("torch.compile's result differs from eager by %.2g", r.CompileDiff))
	}
	return bad
}

// doctorOptions configure marlow bench node.
type doctorOptions struct {
	spec, scale, device, python, runs, out string
	budget                                 time.Duration
	threads                                int
	work                                   bench.Workload
}

func newNodeCheckCmd() *cobra.Command {
	var o doctorOptions
	var prompts, newTokens, trainTurns int
	cmd := &cobra.Command{
		Use:   "node --spec SPEC",
		Short: "Check a GPU node end to end and measure what marlow plan prices runs from",
		Long: `node checks the node a spec's runs will use and measures the torch engine
there, in at most --budget (10 minutes): the preflight of marlow run (the
checkpoints, data, interpreter, packages and GPUs the spec needs); a compile
smoke (a C compiler, the Python headers, Triton on cuda, and a small
function through torch.compile); marlow engine-check in bfloat16 on the
checkpoint of --scale (default: the spec's first scale); the generation
throughput of both backends (reference and slots) and the training
throughput on that checkpoint at the spec's shapes (its LoRA adapter, its
rollouts per problem, --prompts problems, completions up to --new-tokens,
training turns of a stated prompt and a quarter of max_new_tokens); and the
peak GPU memory. It prints each step and writes what it measured, with the
GPU, the date and the commit, to --out (default: gpu-check.json in --runs),
which marlow plan prices GPU runs from (docs/gpu-cost.md). It exits with
status 1 when a step failed; the file is written either way and names the
failed steps. On a machine without a GPU, --device cpu runs the same steps
on the CPU (with a small checkpoint: seeds/paper-dry.yaml's).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.spec == "" {
				return withUsage(cmd, errors.New("bench node: --spec is required"))
			}
			o.threads = resolveThreads(o.threads, 1)
			return runDoctor(cmd.Context(), cmd.OutOrStdout(), o, prompts, newTokens, trainTurns)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.spec, "spec", "", "experiment file whose checkpoint, data and recipe are checked")
	f.StringVar(&o.scale, "scale", "", "scale whose checkpoint is measured (default: the matrix's first)")
	f.StringVar(&o.device, "device", "", "torch device: cuda or cpu (default: the scale's)")
	f.StringVar(&o.python, "python", "", "interpreter of the torch server (default: the scale's, else $MARLOW_PYTHON, else python3)")
	f.StringVar(&o.runs, "runs", runner.DefaultRunsDir, "runs folder whose disk the preflight checks; the file goes there")
	f.StringVar(&o.out, "out", "", "file to write (default: "+runner.NodeCheckFile+" in --runs)")
	f.DurationVar(&o.budget, "budget", 10*time.Minute, "time for all the steps; a step that does not finish in what is left fails")
	f.IntVar(&prompts, "prompts", 0, "problems of the generation workload, each with the spec's rollouts (default: the spec's problems_per_step on cuda, 2 on the CPU)")
	f.IntVar(&newTokens, "new-tokens", 0, "new tokens of the longest generation request (default: 512 on cuda, 8 on the CPU, at most max_new_tokens)")
	f.IntVar(&trainTurns, "train-turns", 0, "turns of a training batch (default: 64 on cuda, 2 on the CPU)")
	addThreadsFlag(cmd, &o.threads, "CPU threads of the torch server")
	return cmd
}

// doctor carries one marlow bench node's state: the file it fills and where
// it prints.
type doctor struct {
	w        io.Writer
	check    *runner.NodeCheck
	deadline time.Time
}

// step runs fn as the named step within what is left of the budget,
// records it and prints its line.
func (d *doctor) step(ctx context.Context, name string, fn func(ctx context.Context) (string, error)) bool {
	fmt.Fprintf(d.w, "bench node: %s ...\n", name)
	start := time.Now()
	s := runner.NodeCheckStep{Name: name}
	if time.Until(d.deadline) <= 0 {
		s.Detail = "not run: the budget is spent (--budget)"
	} else {
		sctx, cancel := context.WithDeadline(ctx, d.deadline)
		detail, err := fn(sctx)
		cancel()
		s.OK, s.Detail = err == nil, detail
		if err != nil {
			s.Detail = err.Error()
			if sctx.Err() != nil && ctx.Err() == nil {
				s.Detail = "did not finish within the budget (--budget): " + s.Detail
			}
		}
	}
	s.Seconds = time.Since(start).Seconds()
	d.check.Steps = append(d.check.Steps, s)
	verdict := "ok"
	if !s.OK {
		verdict = "FAILED"
	}
	fmt.Fprintf(d.w, "bench node: %s: %s (%.1f s)\n", name, verdict, s.Seconds)
	if s.Detail != "" {
		fmt.Fprintf(d.w, "  %s\n", strings.ReplaceAll(strings.TrimSpace(s.Detail), "\n", "\n  "))
	}
	return s.OK
}

func runDoctor(ctx context.Context, w io.Writer, o doctorOptions, prompts, newTokens, trainTurns int) error {
	s, err := spec.Load(o.spec)
	if err != nil {
		return err
	}
	if o.scale == "" && len(s.Matrix.Scales) > 0 {
		o.scale = s.Matrix.Scales[0]
	}
	m, ok := s.Models[o.scale]
	if !ok || m.Engine != "torch" || m.Checkpoint == "" {
		return fmt.Errorf("bench node: scale %q of %s is not a torch checkpoint model: doctor measures the torch engine on a checkpoint (give --scale)", o.scale, o.spec)
	}
	planned, err := spec.Plan(s)
	if err != nil {
		return err
	}
	var run *spec.Run
	for i := range planned {
		if planned[i].Scale == o.scale && planned[i].Config.Train {
			run = &planned[i]
			break
		}
	}
	if run == nil {
		return fmt.Errorf("bench node: %s has no trained run at scale %s to take the recipe's shapes from", o.spec, o.scale)
	}
	if o.device == "" {
		o.device = m.Device
	}
	if o.device != "cuda" && o.device != "cpu" {
		return fmt.Errorf("bench node: --device %q: give cuda or cpu", o.device)
	}
	if o.python == "" {
		o.python = m.Python
	}
	if o.out == "" {
		o.out = filepath.Join(o.runs, runner.NodeCheckFile)
	}
	g := run.Config.GRPO
	maxNew := g.MaxNewTokensFor("generator")
	cuda := o.device == "cuda"
	pick := func(v, onCUDA, onCPU int) int {
		switch {
		case v > 0:
			return v
		case cuda:
			return onCUDA
		}
		return onCPU
	}
	o.work = bench.Workload{Prompts: pick(prompts, g.ProblemsPerStep, 2), Rollouts: g.Rollouts, PromptWords: pick(0, runner.StatedProblemTokens*2/3, 8),
		MaxNew: min(maxNew, pick(newTokens, 512, 8)), TrainTurns: pick(trainTurns, 64, 2),
		TrainPrompt:     pick(0, runner.StatedProblemTokens, 16),
		TrainCompletion: pick(0, int(runner.StatedCompletionShare*float64(maxNew)), 8),
		Rank:            g.Lora.Rank, Alpha: g.Lora.Alpha, Targets: g.Lora.Targets, TrainTime: time.Duration(pick(0, 30, 1)) * time.Second}

	params, _ := runner.CheckpointParams(m.Checkpoint)
	now := time.Now().UTC()
	d := &doctor{w: w, deadline: now.Add(o.budget), check: &runner.NodeCheck{Version: runner.NodeCheckVersion, Device: o.device, DType: m.DType,
		Date: now.Format("2006-01-02"), Time: now.Format(time.RFC3339), Commit: commitOf(), Checkpoint: m.Checkpoint, Params: params,
		Generate: map[string]runner.Rate{}}}
	if d.check.DType == "" || d.check.DType == "auto" {
		d.check.DType = map[bool]string{true: "bfloat16", false: "float32"}[cuda]
	}
	d.check.GPU = "CPU " + bench.CPUModel()
	engines, err := newEngines()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "bench node: %s, scale %s (%s) on %s, budget %v\n", o.spec, o.scale, m.Checkpoint, o.device, o.budget)

	d.step(ctx, "preflight", func(ctx context.Context) (string, error) {
		if err := runner.PreflightIn(ctx, s, "", o.runs, engines); err != nil {
			return "", err
		}
		if !cuda {
			return "checkpoints, data and engines present; " + o.runs + " has room", nil
		}
		devs, err := torch.Devices(ctx, o.python)
		if err != nil {
			return "", err
		}
		if len(devs) == 0 {
			return "", errors.New("the torch engine sees no GPU (nvidia-smi, and a torch built with CUDA)")
		}
		d.check.GPU = devs[0].Name
		return fmt.Sprintf("checkpoints, data and engines present; %s has room; GPUs: %s", o.runs, gpuList(devs)), nil
	})
	d.step(ctx, "compile smoke", func(ctx context.Context) (string, error) {
		py := torch.DefaultPython(o.python)
		out, err := exec.CommandContext(ctx, py, "-c", compileSmoke, o.device).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return "", fmt.Errorf("%s: %w: %s", py, err, tailText(string(ee.Stderr), 2000))
			}
			return "", fmt.Errorf("%s: %w", py, err)
		}
		var r smokeResult
		if err := json.Unmarshal(out, &r); err != nil {
			return "", fmt.Errorf("compile smoke printed %q: %w", tailText(string(out), 500), err)
		}
		detail := fmt.Sprintf("C compiler %s, %s, triton %q, torch.compile %.1f s (max |diff| to eager %.2g)", r.CC, r.PythonH, r.Triton, r.CompileSeconds, r.CompileDiff)
		if bad := r.judge(o.device); len(bad) > 0 {
			return "", fmt.Errorf("%s\n%s", strings.Join(bad, "\n"), detail)
		}
		return detail, nil
	})
	d.step(ctx, "engine-check in bfloat16", func(ctx context.Context) (string, error) {
		opt := enginecheck.Options{Threads: o.threads, Torch: torch.Options{Python: o.python, Device: o.device, DType: "bfloat16", Threads: o.threads}}
		if cuda {
			opt.LogProbTol, opt.StepTol = 2e-3, 1e-2 // make reproduce's GPU tolerances
		}
		rep, err := enginecheck.Run(ctx, m.Checkpoint, opt)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		rep.Print(&b)
		if f := rep.Failures(); len(f) > 0 {
			return "", fmt.Errorf("beyond tolerance: %s\n%s", strings.Join(f, "; "), b.String())
		}
		return "within tolerance", nil
	})
	eopt := engine.Options{Threads: o.threads, Python: o.python, Device: o.device, DType: m.DType, GenTokens: m.GenTokens, TrainTokens: m.TrainTokens, KVCacheFraction: m.KVCacheFraction}
	record := func(r bench.Measured) runner.Rate {
		d.check.CUDAPeakBytes = max(d.check.CUDAPeakBytes, r.CUDAPeakBytes)
		d.check.ServerPeakRSSBytes = max(d.check.ServerPeakRSSBytes, r.PeakRSSBytes)
		return runner.Rate{TokS: r.TokS, Tokens: r.Tokens, Seconds: r.Seconds, Workload: r.Workload}
	}
	generate := func(backend string) {
		d.step(ctx, "generate, "+backend+" backend", func(ctx context.Context) (string, error) {
			opt := eopt
			opt.GenBackend = backend
			r, err := bench.MeasureGenerate(ctx, engines, "torch", m.Checkpoint, opt, o.work)
			if err != nil {
				return "", err
			}
			d.check.Generate[backend] = record(r)
			return fmt.Sprintf("%.0f generated tok/s (%d tokens in %.1f s; %s)", r.TokS, r.Tokens, r.Seconds, r.Workload), nil
		})
	}
	// What plan prices from first (the slot backend, the default on cuda,
	// and training), so that a slow reference loop that spends the budget
	// leaves them measured.
	generate("slots")
	d.step(ctx, "train", func(ctx context.Context) (string, error) {
		r, err := bench.MeasureTrain(ctx, engines, "torch", m.Checkpoint, eopt, o.work)
		if err != nil {
			return "", err
		}
		d.check.Train = record(r)
		return fmt.Sprintf("%.0f trained tok/s (%d tokens in %.1f s; %s)", r.TokS, r.Tokens, r.Seconds, r.Workload), nil
	})
	generate("reference")

	if err := runner.WriteNodeCheck(o.out, d.check); err != nil {
		return err
	}
	fmt.Fprintf(w, "bench node: peak GPU memory %s, peak server RSS %s\n", runner.HumanBytes(d.check.CUDAPeakBytes), runner.HumanBytes(d.check.ServerPeakRSSBytes))
	fmt.Fprintf(w, "bench node: wrote %s (%s, %s); marlow plan --runs %s prices GPU runs from it\n", o.out, d.check.GPU, d.check.Date, o.runs)
	if failed := d.check.Failed(); len(failed) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("bench node: %d of %d steps failed: %s", len(failed), len(d.check.Steps), strings.Join(failed, ", "))}
	}
	fmt.Fprintln(w, "bench node: every step passed")
	return nil
}

// gpuList names the GPUs, e.g. "NVIDIA H200 x8".
func gpuList(devs []engine.Device) string {
	count := map[string]int{}
	var names []string
	for _, d := range devs {
		if count[d.Name] == 0 {
			names = append(names, d.Name)
		}
		count[d.Name]++
	}
	for i, n := range names {
		names[i] = fmt.Sprintf("%s x%d", n, count[n])
	}
	return strings.Join(names, ", ")
}

// commitOf is the commit of this binary, as marlow version reports it,
// with "-dirty" for a build from a modified tree.
func commitOf() string {
	_, rev, dirty := buildInfo()
	if dirty {
		return rev + "-dirty"
	}
	return rev
}

func tailText(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
