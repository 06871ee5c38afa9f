package grpo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"

	"github.com/marlowlab/marlow/harness/internal/atomicfile"
)

// Checkpoint protocol.
//
// The run log is the commit point. A checkpoint of step k is the folder
// <ckpt>/step-<k, 8 digits>/ holding engine/ (what engine.Save writes:
// adapters and optimizer states) and state.json (State). It is written as
// step-<k>.tmp, fsynced and renamed into place; only then is the run log
// committed at step k; only after that are older checkpoint folders
// removed, all but the newest one before k (prune). So at every instant
// the checkpoint of the log's last committed step exists:
//
//   - crash before the rename: a .tmp folder is left; resume deletes it;
//   - crash between the rename and the log commit: the log still says k' < k
//     and step-<k'> still exists; resume loads it and deletes step-<k>;
//   - crash after the commit: step-<k> is the log's step; older folders
//     but the one before it are deleted on the next checkpoint or on
//     resume.
//
// The loop keeps no random state besides the engine's: every draw is keyed
// by (seed, purpose, step, ...), and the data cursor is a function of the
// step, so loading step k and running step k+1 regenerates exactly the rows
// an uninterrupted run writes. Resume fails with ErrCheckpointMissing when
// the log's step has no checkpoint folder, and with ErrCheckpointCorrupt
// when its state is unreadable, names another step or config, or the
// engine cannot load it: never a silent restart.

// Checkpoint errors.
var (
	ErrCheckpointMissing = errors.New("checkpoint missing")
	ErrCheckpointCorrupt = errors.New("checkpoint corrupt")
)

const (
	stateVersion = 1
	stateFile    = "state.json"
	engineDir    = "engine"
)

// State is the loop's state saved with a checkpoint.
type State struct {
	Version    int      `json:"version"`
	Step       int64    `json:"step"`        // last completed step
	NextCursor int64    `json:"next_cursor"` // train-stream cursor of the next step's first problem
	ConfigHash string   `json:"config_hash"`
	Adapters   []string `json:"adapters"`
	LastValAcc *float64 `json:"last_val_acc,omitempty"`
	LastReward *float64 `json:"last_reward,omitempty"`
}

var ckptName = regexp.MustCompile(`^step-([0-9]{8,19})(\.tmp)?$`)

// CheckpointPath is the folder of the checkpoint of step under dir.
func CheckpointPath(dir string, step int64) string {
	return filepath.Join(dir, fmt.Sprintf("step-%08d", step))
}

// checkpoint saves the engine and the state of step, then commits the log.
func (t *Trainer) checkpoint(ctx context.Context, step int64) error {
	id := t.Config.RunID
	final := CheckpointPath(t.CkptDir, step)
	tmp := final + ".tmp"
	if err := os.MkdirAll(t.CkptDir, 0o755); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: %w", id, step, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: %w", id, step, err)
	}
	if err := os.MkdirAll(filepath.Join(tmp, engineDir), 0o755); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: %w", id, step, err)
	}
	if err := t.Engine.Save(ctx, filepath.Join(tmp, engineDir)); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: save engine: %w", id, step, err)
	}
	st := t.st
	st.Step = step
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: encode state: %w", id, step, err)
	}
	if err := atomicfile.WriteSynced(filepath.Join(tmp, stateFile), b, nil); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: %w", id, step, err)
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: %w", id, step, err)
	}
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: %w", id, step, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: %w", id, step, err)
	}
	if err := atomicfile.SyncDir(t.CkptDir); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: %w", id, step, err)
	}
	if err := t.Log.Commit(step); err != nil {
		return fmt.Errorf("grpo: run %s: commit step %d: %w", id, step, err)
	}
	if err := prune(t.CkptDir, step); err != nil {
		return fmt.Errorf("grpo: run %s: checkpoint %d: %w", id, step, err)
	}
	return nil
}

// prune removes every checkpoint folder and temporary under dir except the
// one of keep and the newest one before it: the run keeps its last two
// checkpoints, so that a segment damaged after the older one (a truncated
// write, a bad disk block) costs the steps since it, not the whole run
// (the runner rolls the log back to it; see CheckpointSteps). Folders
// after keep (a crash between a checkpoint's rename and its log commit)
// are removed.
func prune(dir string, keep int64) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("prune checkpoints: %w", err)
	}
	prev := int64(-1)
	for _, e := range ents {
		if m := ckptName.FindStringSubmatch(e.Name()); m != nil && m[2] == "" {
			if n, _ := strconv.ParseInt(m[1], 10, 64); n < keep && n > prev {
				prev = n
			}
		}
	}
	for _, e := range ents {
		m := ckptName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		if (n == keep || n == prev) && m[2] == "" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("prune checkpoints: %w", err)
		}
	}
	return nil
}

// CheckpointSteps lists the steps of the complete checkpoint folders under
// dir (temporaries left out), in increasing order; none when dir does not
// exist.
func CheckpointSteps(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var out []int64
	for _, e := range ents {
		if m := ckptName.FindStringSubmatch(e.Name()); m != nil && m[2] == "" && e.IsDir() {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// restore loads the checkpoint of step into the engine and returns its state.
func (t *Trainer) restore(ctx context.Context, step int64) (State, error) {
	path := CheckpointPath(t.CkptDir, step)
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !info.IsDir()) {
		return State{}, fmt.Errorf("%w: the run log is committed at step %d but %s does not exist", ErrCheckpointMissing, step, path)
	}
	if err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrCheckpointMissing, err)
	}
	b, err := os.ReadFile(filepath.Join(path, stateFile))
	if err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrCheckpointCorrupt, err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("%w: %s: %w", ErrCheckpointCorrupt, filepath.Join(path, stateFile), err)
	}
	switch {
	case st.Version != stateVersion:
		return State{}, fmt.Errorf("%w: %s has state version %d, want %d", ErrCheckpointCorrupt, path, st.Version, stateVersion)
	case st.Step != step:
		return State{}, fmt.Errorf("%w: %s holds step %d", ErrCheckpointCorrupt, path, st.Step)
	case st.ConfigHash != t.Config.Hash():
		return State{}, fmt.Errorf("%w: %s was written by config %s, resuming with %s", ErrCheckpointCorrupt, path, st.ConfigHash, t.Config.Hash())
	case !reflect.DeepEqual(st.Adapters, t.adapters) && !(len(st.Adapters) == 0 && len(t.adapters) == 0):
		return State{}, fmt.Errorf("%w: %s holds adapters %v, want %v", ErrCheckpointCorrupt, path, st.Adapters, t.adapters)
	case st.NextCursor != step*int64(t.Config.ProblemsPerStep) && step > 0:
		return State{}, fmt.Errorf("%w: %s has cursor %d at step %d", ErrCheckpointCorrupt, path, st.NextCursor, step)
	}
	if err := t.Engine.Load(ctx, filepath.Join(path, engineDir)); err != nil {
		return State{}, fmt.Errorf("%w: load engine from %s: %w", ErrCheckpointCorrupt, path, err)
	}
	if err := prune(t.CkptDir, step); err != nil {
		return State{}, err
	}
	return st, nil
}
