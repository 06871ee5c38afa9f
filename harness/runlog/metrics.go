package runlog

import "os"

// ReadMetrics reads the manifest and the committed steps/, evals/ and
// timing/ rows of the run in dir, without samples/ and prompts/ (the bulk
// of a run's bytes): what a live view of the curves needs after each
// commit. Segments are checked against the inventory as ReadRun does.
func ReadMetrics(dir string) (*Run, error) {
	s := source{fsys: os.DirFS(dir), label: dir}
	m, err := readManifestFS(s, ".")
	if err != nil {
		return nil, err
	}
	r := &Run{Dir: dir, Manifest: m}
	idx := segmentIndex(m)
	if r.Steps, err = readTableRows(s, ".", stepsDef, m.LastStep, idx); err != nil {
		return nil, err
	}
	if r.Evals, err = readTableRows(s, ".", evalsDef, m.LastStep, idx); err != nil {
		return nil, err
	}
	if r.Timing, err = readTableRows(s, ".", timingDef, m.LastStep, idx); err != nil {
		return nil, err
	}
	return r, nil
}
