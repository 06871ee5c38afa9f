package runner

import (
	"fmt"
	"os"
	"strings"
)

// The lock file of a run names its holder on its first line, "pid N host
// H", and, after a run could not record its final status in its manifest,
// a second line starting with unrecordedNote.
const unrecordedNote = "unrecorded"

func holderLine() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("pid %d host %s\n", os.Getpid(), host)
}

// holderOf describes the holder named in a lock file.
func holderOf(lockFile string) string {
	b, err := os.ReadFile(lockFile)
	first, _, _ := strings.Cut(string(b), "\n")
	if err != nil || !strings.HasPrefix(first, "pid ") {
		return "holder unknown"
	}
	pid, host, _ := strings.Cut(strings.TrimPrefix(first, "pid "), " host ")
	return fmt.Sprintf("held by pid %s on host %s", pid, host)
}

// write replaces the lock file's content; a failure is ignored (the lock
// itself is what matters).
func (l *runLock) write(s string) {
	if l == nil || l.f == nil {
		return
	}
	if err := l.f.Truncate(0); err != nil {
		return
	}
	_, _ = l.f.WriteAt([]byte(s), 0)
	_ = l.f.Sync()
}

// note adds a line to the lock file after the holder line.
func (l *runLock) note(line string) {
	l.write(holderLine() + strings.ReplaceAll(line, "\n", " ") + "\n")
}

// unrecordedStatus returns the note of a run that could not record its
// final status ("" when none): the status it meant to record and why.
func unrecordedStatus(runDir string) string {
	b, err := os.ReadFile(lockPath(runDir))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, unrecordedNote+" "); ok {
			return rest
		}
	}
	return ""
}
