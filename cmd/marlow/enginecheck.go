package main

import (
	"fmt"
	"strings"

	"github.com/marlowlab/marlow/harness/engine/enginecheck"
	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
)

func newEngineCheckCmd() *cobra.Command {
	var name, device, dtype, headDType, python, work, specPath, scale string
	var tolLP, tolStep, floor, tolUpdate, tolShare, tolP99 float64
	var threads int
	cmd := &cobra.Command{
		Use:   "engine-check [CHECKPOINT]",
		Short: "Cross-check the torch engine against the native engine on one checkpoint",
		Long: "engine-check scores a fixed set of token sequences with the native engine and the torch\n" +
			"engine (fp32 by default) over the Hugging Face checkpoint folder CHECKPOINT, with no adapter\n" +
			"and with a seeded random non-zero LoRA adapter; takes one identical GRPO train step in both;\n" +
			"and loads each engine's saved checkpoint into the other. It prints the largest absolute\n" +
			"difference of per-token log-probs and the relative differences of the step's loss, KL and\n" +
			"per-role gradient norms, and exits with status 1 when any exceeds its tolerance\n" +
			"(defaults: 1e-4 absolute for log-probs, 1e-3 relative for the step, as CI checks on the CPU).\n" +
			"The optimizer step is compared component by component: on AdamW's first step every\n" +
			"component moves by lr, only its sign follows the gradient, so components whose gradient is\n" +
			"below a noise floor (--noise-floor times the largest) may move in opposite directions in the\n" +
			"two engines. Updates above the floor must agree within --tol-update (in units of lr), and\n" +
			"torch's stepped adapter with its below-floor components taken from native's must score within\n" +
			"the log-prob tolerance; the raw after-step difference is printed, not judged.\n" +
			"Each engine is also checked to honour a routing's adapter settings: from the seeded adapter\n" +
			"a step at half the rate moves it by half the plain step, a KL coefficient changes the step,\n" +
			"and the base policy (what a frozen role samples) scores and samples bit for bit the same\n" +
			"before and after the steps; the same-role agents' gradient cosines are compared too.\n" +
			"Last, torch samples completions (half on the base policy, half on the seeded adapter) and\n" +
			"rescores them as training does; Δ = training − rollout log-prob is the log of the first\n" +
			"step's importance ratio, fully on-policy. In float32 every |Δ| must be within --tol-logprob.\n" +
			"With --dtype bfloat16 (or float16) the figures against native are printed, not judged, and\n" +
			"the rollout agreement is: at most --tol-clip-share of the tokens may have a ratio outside the\n" +
			"clip band (0.8, 1.28) and the 99th percentile of |Δ| must be within --tol-rollout-p99.\n" +
			"Logits come from a float32 head in every dtype; --head-dtype model shows what a head in the\n" +
			"model's dtype would do.\n" +
			"With --spec instead of CHECKPOINT the checkpoint (and, unless --python is given, the\n" +
			"interpreter) is that of --scale of the spec (default: the matrix's first scale).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (specPath == "") == (len(args) == 0) {
				return withUsage(cmd, fmt.Errorf("engine-check: give either CHECKPOINT or --spec"))
			}
			if specPath != "" {
				dir, py, err := specCheckpoint(specPath, scale)
				if err != nil {
					return err
				}
				args = []string{dir}
				if python == "" {
					python = py
				}
			}
			if name != "torch" {
				return fmt.Errorf("engine-check: --engine %q: only torch is checked against native", name)
			}
			threads := resolveThreads(threads, 1) // the two engines take turns (enginecheck.Run runs one at a time), so each gets every core
			opt := enginecheck.Options{LogProbTol: tolLP, StepTol: tolStep, NoiseFloor: floor, UpdateTol: tolUpdate,
				RolloutShare: tolShare, RolloutP99: tolP99, Threads: threads, Work: work,
				Torch: torch.Options{Python: python, Device: device, DType: dtype, HeadDType: headDType, Threads: threads}}
			if headDType == "model" {
				opt.Torch.GenBackend = "reference" // the slot backend's head is always float32
			}
			rep, err := enginecheck.Run(cmd.Context(), args[0], opt)
			if err != nil {
				return fmt.Errorf("engine-check %s: %w", args[0], err)
			}
			rep.Print(cmd.OutOrStdout())
			if f := rep.Failures(); len(f) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("engine-check %s: beyond tolerance:\n  %s", args[0], strings.Join(f, "\n  "))}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "engine-check: within tolerance")
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "engine", "torch", "engine checked against native (torch)")
	cmd.Flags().StringVar(&device, "device", "cpu", "torch device: cpu, cuda or auto")
	cmd.Flags().StringVar(&dtype, "dtype", "float32", "torch dtype: float32 judges every figure, bfloat16 or float16 the rollout agreement only")
	cmd.Flags().StringVar(&headDType, "head-dtype", "float32", "dtype of the LM head that feeds the logits: float32 or model (the model's dtype, for comparison)")
	cmd.Flags().Float64Var(&tolShare, "tol-clip-share", enginecheck.DefaultRolloutShare, "outside float32: largest share of rollout tokens whose step-0 ratio is outside the clip band")
	cmd.Flags().Float64Var(&tolP99, "tol-rollout-p99", enginecheck.DefaultRolloutP99, "outside float32: largest 99th percentile of |training − rollout log-prob|")
	cmd.Flags().StringVar(&python, "python", "", "interpreter of the torch server (default $MARLOW_PYTHON, else python3)")
	cmd.Flags().Float64Var(&tolLP, "tol-logprob", enginecheck.DefaultLogProbTol, "largest absolute log-prob difference accepted")
	cmd.Flags().Float64Var(&tolStep, "tol-step", enginecheck.DefaultStepTol, "largest relative difference of loss, KL and gradient norms accepted")
	cmd.Flags().Float64Var(&floor, "noise-floor", enginecheck.DefaultNoiseFloor, "gradient noise floor of the optimizer-step comparison, relative to the largest |gradient| (at least 100 x AdamW eps)")
	cmd.Flags().Float64Var(&tolUpdate, "tol-update", enginecheck.DefaultUpdateTol, "largest difference of an update above the noise floor accepted, in units of lr")
	cmd.Flags().StringVar(&specPath, "spec", "", "check the checkpoint of a spec's scale instead of CHECKPOINT")
	cmd.Flags().StringVar(&scale, "scale", "", "scale of --spec (default: the matrix's first)")
	cmd.Flags().StringVar(&work, "work", "", "keep the check's checkpoints in this folder (default: a temporary folder, removed)")
	addThreadsFlag(cmd, &threads, "CPU threads of each of the two engines")
	return cmd
}

// specCheckpoint returns the checkpoint folder and interpreter of scale (the
// matrix's first when empty) of the spec at path, which must run on the
// torch engine.
func specCheckpoint(path, scale string) (dir, python string, err error) {
	s, err := spec.Load(path)
	if err != nil {
		return "", "", fmt.Errorf("engine-check: %w", err)
	}
	if scale == "" {
		if len(s.Matrix.Scales) == 0 {
			return "", "", fmt.Errorf("engine-check: spec %s has no scales", path)
		}
		scale = s.Matrix.Scales[0]
	}
	m, ok := s.Models[scale]
	if !ok {
		return "", "", fmt.Errorf("engine-check: spec %s has no model for scale %q", path, scale)
	}
	if m.Engine != "torch" || m.Checkpoint == "" {
		return "", "", fmt.Errorf("engine-check: scale %q of spec %s is not a torch checkpoint (engine %s)", scale, path, m.Engine)
	}
	return m.Checkpoint, m.Python, nil
}
