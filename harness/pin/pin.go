// Package pin records provenance: the git commit and dirty state of the
// repository holding a spec, the toolchain and module versions, seeds, and
// hashes of the data and checkpoint files a run reads.
package pin

// Provenance is what a run manifest records about where a result came from.
type Provenance struct {
	Repo       string            `json:"repo"`        // repository root
	Commit     string            `json:"commit"`      // HEAD commit hash
	Branch     string            `json:"branch"`      // "" when HEAD is detached
	Dirty      bool              `json:"dirty"`       // uncommitted changes present
	DiffHash   string            `json:"diff_hash"`   // sha256 of the uncommitted changes, "" when clean
	AllowDirty bool              `json:"allow_dirty"` // run was started with --allow-dirty
	GoVersion  string            `json:"go_version"`
	Modules    map[string]string `json:"modules"` // module path -> version
	Files      map[string]string `json:"files"`   // path -> sha256 of referenced data and checkpoints
}
