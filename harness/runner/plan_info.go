package runner

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/marlowlab/marlow/harness/pretrain"
)

// baseModelJSON is one base model of `plan --json`.
type baseModelJSON struct {
	Scale         string   `json:"scale"`
	Where         string   `json:"where"` // committed, cached, pretrain, checkpoint or missing
	Dir           string   `json:"dir"`
	PretrainSteps int      `json:"pretrain_steps"`         // 0 for checkpoint models
	KeySettings   []string `json:"key_settings,omitempty"` // non-default workflow settings in the pretraining key
}

// estimateJSON is the time estimate of `plan --json`.
type estimateJSON struct {
	Seconds         float64               `json:"seconds"`     // every turn trained
	MinSeconds      float64               `json:"min_seconds"` // no turn trained
	PretrainSeconds float64               `json:"pretrain_seconds"`
	Parallel        int                   `json:"parallel_runs"`
	GenTokens       float64               `json:"generated_tokens"`
	TrainTokens     float64               `json:"trained_tokens"` // every turn trained
	Speeds          map[string][2]float64 `json:"speeds"`         // scale -> [train tok/s, generated tok/s], one thread
	Unestimated     []string              `json:"unestimated"`
}

func basesJSON(bs []BaseModel) []baseModelJSON {
	out := []baseModelJSON{}
	for _, b := range bs {
		out = append(out, baseModelJSON{b.Scale, b.Where, b.Dir, b.PretrainSteps, b.KeySettings})
	}
	return out
}

func estimateOf(e *Estimate) *estimateJSON {
	if e == nil {
		return nil
	}
	out := &estimateJSON{Seconds: math.Round(e.Seconds), MinSeconds: math.Round(e.MinSeconds), PretrainSeconds: math.Round(e.PretrainSeconds), Parallel: e.Parallel,
		GenTokens: math.Round(e.GenTokens), TrainTokens: math.Round(e.TrainTokens), Speeds: map[string][2]float64{},
		Unestimated: append([]string{}, e.Unestimated...)}
	for sc, sp := range e.Speeds {
		out.Speeds[sc] = [2]float64{math.Round(sp.TrainTokS), math.Round(sp.GenTokS)}
	}
	return out
}

// whereText says in words where a base model comes from.
func whereText(b BaseModel) string {
	switch b.Where {
	case BaseCommitted:
		return "committed: " + b.Dir
	case BaseCached:
		return "cached: " + b.Dir
	case BasePretrain:
		t := fmt.Sprintf("neither committed nor cached: marlow run pretrains it first (%d steps)", b.PretrainSteps)
		if len(b.Searched) > 0 {
			t += "; looked in " + strings.Join(b.Searched, ", ")
		}
		if b.NoRepository {
			t += fmt.Sprintf("; neither the spec nor the working folder is in a repository with %s: run marlow from a marlow checkout to use its committed base models", pretrain.CommittedDir)
		}
		return t
	case BaseMissing:
		return "checkpoint folder not found: " + b.Dir
	}
	return "checkpoint: " + b.Dir
}

// Duration renders seconds roughly: "40 s", "6 min", "2.5 h".
func Duration(sec float64) string {
	switch {
	case sec < 90:
		return fmt.Sprintf("%.0f s", math.Max(1, sec))
	case sec < 90*60:
		return fmt.Sprintf("%.0f min", sec/60)
	}
	return fmt.Sprintf("%.1f h", sec/3600)
}

// writePlanInfo writes the base models and the estimate after the table.
func writePlanInfo(w io.Writer, info PlanInfo) error {
	if len(info.Bases) > 0 {
		fmt.Fprintln(w, "\nbase models:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, b := range info.Bases {
			fmt.Fprintf(tw, "  %s\t%s\n", b.Scale, whereText(b))
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		for _, b := range info.Bases {
			if len(b.KeySettings) > 0 {
				verb := "are"
				if len(b.KeySettings) == 1 {
					verb = "is"
				}
				fmt.Fprintf(w, "  note: %s: %s %s part of the base model's pretraining key, so these runs start from another base model than runs at the defaults\n",
					b.Scale, strings.Join(b.KeySettings, " and "), verb)
				if b.KeyHint != "" {
					fmt.Fprintf(w, "    (%s)\n", b.KeyHint)
				}
			}
		}
	}
	e := info.Estimate
	if e == nil {
		return nil
	}
	if len(e.Speeds) == 0 {
		// checkpoint models alone: their GPU cost follows
		if len(e.Unestimated) > 0 {
			_, err := fmt.Fprintf(w, "\ntime not estimated: %s\n", strings.Join(e.Unestimated, "; "))
			return err
		}
		return nil
	}
	var speeds []string
	for _, sc := range slices.Sorted(maps.Keys(e.Speeds)) {
		sp := e.Speeds[sc]
		speeds = append(speeds, fmt.Sprintf("%s: train %.0f, generate %.0f tok/s", sc, sp.TrainTokS, sp.GenTokS))
	}
	fmt.Fprintf(w, "\nestimated time: %s to %s with %d runs at once", Duration(e.MinSeconds), Duration(e.Seconds), e.Parallel)
	if e.PretrainSeconds > 0 {
		fmt.Fprintf(w, ", %s of it pretraining", Duration(e.PretrainSeconds))
	}
	fmt.Fprintf(w, "\n  rough: %.2g tokens generated, and up to %.2g trained (GRPO trains only the turns of groups whose rewards differ),\n"+
		"  at one-thread speeds measured just now on random weights (%s);\n"+
		"  turns as long as the teacher's the model imitates; RL changes output lengths, and a busy machine is slower\n",
		e.GenTokens, e.TrainTokens, strings.Join(speeds, "; "))
	if len(e.Unestimated) > 0 {
		fmt.Fprintf(w, "  not included: %s\n", strings.Join(e.Unestimated, "; "))
	}
	return nil
}
