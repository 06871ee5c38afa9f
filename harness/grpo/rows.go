package grpo

import (
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// answerRole reports whether a role's turns hold an answer to the problem
// graded by the task's verifier (rather than a verdict or a selection).
func answerRole(role string) bool { return study.RoleOf(role).Answers }

func ratio(num, den int) float64 {
	if den == 0 {
		return math.NaN()
	}
	return float64(num) / float64(den)
}

// EvalRows summarises validation episodes of one workflow: one row per role
// (sorted) and a "*" row for the workflow.
//
//   - "*": Accuracy is final-answer accuracy; AnyCorrect the fraction of
//     episodes where any answering agent (generator, worker, synthesizer)
//     was correct; SelectionAcc is NaN.
//   - role: Accuracy is the mean regraded correctness of the role's graded
//     turns (NaN for the orchestrator, which gives no answer); AnyCorrect
//     the fraction of episodes with the role where any of its agents was
//     correct; SelectionAcc (aggregator, synthesizer) the fraction of
//     episodes with at least one correct candidate where the role's answer
//     was correct, NaN elsewhere or when no episode had a correct candidate.
//
// FormatRate is the compliant fraction of turns, MeanLen the mean completion
// length in tokens, Problems the episodes the row covers, Turns its turns.
//
// The episodes' Flow.Readings give the strict figures: the "*" row's
// StrictAccuracy counts an episode correct only when its final answer is
// correct and every supervisory turn parsed (Accuracy, the lenient figure,
// credits whatever a fallback chose), and a supervisory role's
// FallbackRate is the fraction of its turns each fallback was taken for.
func EvalRows(runID string, step int64, wf string, eps []*workflow.Episode) []runlog.EvalRow {
	type acc struct {
		turns, compliant, tokens, graded, correct     int
		episodes, anyCorrect, selEligible, selCorrect int
		strict                                        int
		fallbacks                                     map[string]int // nil: the role has no readings
	}
	by := map[string]*acc{}
	var total acc
	for _, ep := range eps {
		total.episodes++
		readings := episodeReadings(ep)
		allParsed := true
		for _, r := range readings {
			allParsed = allParsed && r.Parsed
		}
		if ep.FinalVerdict.Correct {
			total.correct++
			if allParsed {
				total.strict++
			}
		}
		roleAny := map[string]bool{}
		seen := map[string]bool{}
		var anyAnswer bool
		for _, t := range ep.Turns {
			a := by[t.Role]
			if a == nil {
				a = &acc{}
				by[t.Role] = a
			}
			if !seen[t.Role] {
				seen[t.Role] = true
				a.episodes++
			}
			a.turns++
			total.turns++
			n := len(t.Completion.IDs)
			a.tokens += n
			total.tokens += n
			if t.Compliant {
				a.compliant++
				total.compliant++
			}
			if t.Graded {
				a.graded++
				if t.Verdict.Correct {
					a.correct++
					roleAny[t.Role] = true
					if answerRole(t.Role) {
						anyAnswer = true
					}
				}
			}
		}
		for _, r := range readings {
			a := by[r.Role]
			if a == nil {
				continue // a reading always names one of the episode's turns
			}
			if a.fallbacks == nil {
				a.fallbacks = map[string]int{}
			}
			if r.Fallback != workflow.NoFallback {
				a.fallbacks[string(r.Fallback)]++
			}
		}
		for role := range roleAny {
			by[role].anyCorrect++
		}
		if anyAnswer {
			total.anyCorrect++
		}
		for _, sel := range study.Roles {
			if cand := study.RoleOf(sel).Chooses; cand != "" && seen[sel] && roleAny[cand] {
				by[sel].selEligible++
				if roleAny[sel] {
					by[sel].selCorrect++
				}
			}
		}
	}
	roles := slices.Sorted(maps.Keys(by))
	rows := make([]runlog.EvalRow, 0, len(roles)+1)
	for _, r := range roles {
		a := by[r]
		row := runlog.EvalRow{
			RunID: runID, Step: step, Workflow: wf, Split: "val", Role: r,
			Accuracy: ratio(a.correct, a.graded), AnyCorrect: ratio(a.anyCorrect, a.episodes),
			SelectionAcc: math.NaN(), FormatRate: ratio(a.compliant, a.turns), MeanLen: ratio(a.tokens, a.turns),
			Problems: int64(a.episodes), Turns: int64(a.turns), StrictAccuracy: math.NaN(),
		}
		if a.fallbacks != nil {
			row.FallbackRate = make(map[string]float64, len(a.fallbacks))
			for fb, n := range a.fallbacks {
				row.FallbackRate[fb] = ratio(n, a.turns)
			}
		}
		if a.graded == 0 {
			row.AnyCorrect = math.NaN()
		}
		if study.RoleOf(r).Chooses != "" {
			row.SelectionAcc = ratio(a.selCorrect, a.selEligible)
		}
		rows = append(rows, row)
	}
	rows = append(rows, runlog.EvalRow{
		RunID: runID, Step: step, Workflow: wf, Split: "val", Role: "*",
		Accuracy: ratio(total.correct, total.episodes), AnyCorrect: ratio(total.anyCorrect, total.episodes),
		SelectionAcc: math.NaN(), FormatRate: ratio(total.compliant, total.turns), MeanLen: ratio(total.tokens, total.turns),
		Problems: int64(total.episodes), Turns: int64(total.turns), StrictAccuracy: ratio(total.strict, total.episodes),
	})
	return rows
}

// episodeReadings are the episode's supervisory readings (none without a
// Flow, as in episodes built by hand).
func episodeReadings(ep *workflow.Episode) []workflow.Reading {
	if ep.Flow == nil {
		return nil
	}
	return ep.Flow.Readings()
}

// turnFallback is the fallback the workflow took for turn k of ep ("" when
// it has none).
func turnFallback(ep *workflow.Episode, k int) string {
	for _, r := range episodeReadings(ep) {
		if r.Turn == k {
			return string(r.Fallback)
		}
	}
	return ""
}

// sampleRow renders turn k of ep.
func sampleRow(runID string, step int64, split string, ep *workflow.Episode, k int, adv float64) runlog.SampleRow {
	t := &ep.Turns[k]
	return runlog.SampleRow{
		RunID: runID, Step: step, Workflow: ep.Workflow, Split: split, ProblemID: ep.Problem.ID,
		Rollout: int64(ep.Rollout), Agent: t.Agent, Role: t.Role, Policy: t.Adapter,
		Prompt: workflow.RenderPrompt(t.Prompt), Completion: t.Completion.Text, Parsed: t.Parsed,
		Compliant: t.Compliant, Correct: t.Graded && t.Verdict.Correct, Reward: ep.Reward(), Advantage: adv,
		Tokens: int64(len(t.Completion.IDs)), Finish: t.Completion.Finish, Fallback: turnFallback(ep, k),
	}
}

// FinalAgent is the Agent and Role of the sample row that holds an
// episode's final answer: Parsed is the answer the verifier found and
// Correct its grade. The analysis package relies on this convention.
const FinalAgent = "final"

// ValSampleRows renders every turn of validation episodes, each episode
// followed by its "final" row.
func ValSampleRows(runID string, step int64, eps []*workflow.Episode) []runlog.SampleRow {
	var rows []runlog.SampleRow
	for _, ep := range eps {
		for k := range ep.Turns {
			rows = append(rows, sampleRow(runID, step, "val", ep, k, 0))
		}
		rows = append(rows, runlog.SampleRow{
			RunID: runID, Step: step, Workflow: ep.Workflow, Split: "val", ProblemID: ep.Problem.ID,
			Rollout: int64(ep.Rollout), Agent: FinalAgent, Role: FinalAgent,
			Completion: ep.Final, Parsed: ep.FinalVerdict.Answer, Compliant: ep.FinalVerdict.Answer != "",
			Correct: ep.FinalVerdict.Correct, Reward: ep.Reward(),
		})
	}
	return rows
}

// trainSampleRows picks n train turns by the smallest per-turn hash of
// (run seed, "sample", step, problem, rollout, agent, iteration), rendered
// in episode and turn order.
func trainSampleRows(runID string, seed uint64, step int64, eps []*workflow.Episode, adv [][]float64, n int) []runlog.SampleRow {
	type pick struct {
		h    uint64
		i, k int
	}
	var all []pick
	for i, ep := range eps {
		for k, t := range ep.Turns {
			h := workflow.SeedKey{RunSeed: seed, Purpose: "sample", Step: step, Problem: ep.ProblemIndex,
				Rollout: ep.Rollout, Agent: t.Agent, Iteration: t.Iteration}.Seed()
			all = append(all, pick{h, i, k})
		}
	}
	sort.Slice(all, func(a, b int) bool {
		if all[a].h != all[b].h {
			return all[a].h < all[b].h
		}
		if all[a].i != all[b].i {
			return all[a].i < all[b].i
		}
		return all[a].k < all[b].k
	})
	if n > len(all) {
		n = len(all)
	}
	chosen := all[:n]
	sort.Slice(chosen, func(a, b int) bool {
		if chosen[a].i != chosen[b].i {
			return chosen[a].i < chosen[b].i
		}
		return chosen[a].k < chosen[b].k
	})
	rows := make([]runlog.SampleRow, n)
	for j, p := range chosen {
		rows[j] = sampleRow(runID, step, "train", eps[p.i], p.k, adv[p.i][p.k])
	}
	return rows
}

// meanStd returns the mean and population standard deviation (NaN, NaN
// when empty).
func meanStd(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return m, math.Sqrt(ss / float64(len(xs)))
}

// stepRow combines an engine's role statistics with the harness's reward
// statistics.
func stepRow(runID string, step int64, policy string, rs engine.RoleStats, rewards []float64, zeroVar float64, lr float64) runlog.StepRow {
	m, s := meanStd(rewards)
	var cos map[string]float64
	if len(rs.RoleCos) > 0 {
		cos = make(map[string]float64, len(rs.RoleCos))
		for k, v := range rs.RoleCos {
			cos[k] = v
		}
	}
	return runlog.StepRow{
		RunID: runID, Step: step, Policy: policy, Role: rs.Role,
		Loss: rs.Loss, GradNorm: rs.GradNorm, GradShare: rs.GradShare,
		AgentCosMean: rs.AgentCosMean, AgentCosMin: rs.AgentCosMin, RoleCos: cos,
		Tokens: int64(rs.Tokens), Seqs: int64(rs.Seqs), MeanLen: rs.MeanLen,
		Entropy: rs.Entropy, Perplexity: rs.Perplexity, RatioMean: rs.RatioMean, RatioMax: rs.RatioMax,
		ClipFrac: rs.ClipFrac, KL: rs.KL, RewardMean: m, RewardStd: s, ZeroVarFrac: zeroVar, LR: lr,
		CoherenceCos: rs.CoherenceCos, CoherenceScale: rs.CoherenceScale,
		AgentCos: maps.Clone(rs.AgentCos),
	}
}
