// Package sandbox runs untrusted programs (the code that models write for
// code tasks) in a contained child process.
//
// # Threat model
//
// The program is hostile or simply buggy: it may loop forever, fork without
// bound, allocate far more memory than the machine has, print gigabytes, try
// to read the harness's secrets (environment variables, files), try to write
// or delete files outside its working directory, try to reach the network
// (including services on the host's loopback interface), or leave background
// processes behind. The harness must survive all of this, keep grading other
// programs, and report the program's test as failed.
//
// It is NOT designed to stop a kernel exploit or a container escape: the
// program runs on the host kernel, and the isolation below only uses
// namespaces, rlimits and an unprivileged user id. Run the harness on a
// machine or VM you can afford to lose if that matters.
//
// # Mechanism
//
// Run re-executes the current binary (/proc/self/exe) with a sentinel
// environment variable. The package's init function notices the sentinel and,
// instead of starting the harness, becomes a small shim that:
//
//   - runs in new network, PID, mount and IPC namespaces (Cloneflags), so it
//     has no network at all (a fresh network namespace has only a loopback
//     interface, which is down), sees only its own processes (a fresh /proc
//     is mounted), and is the namespace's init: when it or the program it
//     execs dies, the kernel kills every process left in the namespace;
//   - remounts every mount read-only in its private mount namespace, except
//     a bind mount of the fresh temporary working directory;
//   - sets rlimits on CPU seconds, address space, process count, open files,
//     file size and core dumps;
//   - drops to an unprivileged user (nobody, 65534) when the harness runs as
//     root, so that RLIMIT_NPROC applies and files owned by others are
//     protected even where a remount is not possible;
//   - execs the program with a scrubbed environment (PATH, HOME, TMPDIR,
//     LANG and fixed PYTHON* settings; nothing from the harness).
//
// The parent enforces a wall-clock timeout (killing the namespace's init
// kills everything in it) and caps stdout/stderr: output past the cap is
// discarded, reported as truncated, and the program is killed.
//
// # Limits of the mechanism
//
//   - RLIMIT_NPROC counts every process of the sandbox user on the machine,
//     so concurrent runs share the process budget (size it for the worker
//     pool); with a user namespace (non-root harness) it counts the
//     harness user's own processes too.
//   - Some kernels (gVisor, for one) do not enforce RLIMIT_CPU; the
//     wall-clock timeout is the backstop.
//   - Without a PID namespace (unsafe mode), a program that starts a new
//     session escapes the process-group kill and may outlive the run.
//   - Without the read-only remount, only file permissions (the nobody
//     user) protect the file system; world-writable directories such as
//     /tmp stay writable.
//
// Probe detects what the machine allows. When network isolation is not
// available, New refuses to build a sandbox unless Config.AllowUnsafe is set
// (the CLI's --unsafe-code-exec); the isolation level string is recorded in
// the run manifest.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Isolation describes what the sandbox can apply on this machine.
type Isolation struct {
	// Level is a compact description for the run manifest, e.g.
	// "netns+pidns+mntns+ipcns+rofs+nobody+rlimits" or "rlimits (UNSAFE)".
	Level        string
	Network      bool // new network namespace (no network at all)
	PID          bool // new PID namespace (namespace init kills all on exit)
	Mount        bool // new mount namespace
	IPC          bool // new IPC namespace
	ReadOnlyFS   bool // everything but the working dir is mounted read-only
	Unprivileged bool // the program runs as nobody
	// Detail explains why stronger levels were unavailable ("" when the
	// strongest applied).
	Detail string
}

// Limits bound one program run. Zero fields take the defaults of
// DefaultLimits.
type Limits struct {
	Timeout      time.Duration // wall clock
	CPUSeconds   uint64        // RLIMIT_CPU
	AddressSpace uint64        // RLIMIT_AS, bytes
	Processes    uint64        // RLIMIT_NPROC (per user id; the sandbox user)
	OpenFiles    uint64        // RLIMIT_NOFILE
	FileSize     uint64        // RLIMIT_FSIZE, bytes
	OutputBytes  int           // cap on each of stdout and stderr
}

// DefaultLimits are the limits used for zero fields.
var DefaultLimits = Limits{
	Timeout:      6 * time.Second,
	CPUSeconds:   6,
	AddressSpace: 2 << 30,
	Processes:    64,
	OpenFiles:    64,
	FileSize:     16 << 20,
	OutputBytes:  1 << 20,
}

// withDefaults fills the zero fields of l from DefaultLimits.
func (l Limits) withDefaults() Limits { return l.overlay(DefaultLimits) }

// Config configures a Sandbox.
type Config struct {
	// Limits applied to every run (per-run Spec.Limits override non-zero
	// fields).
	Limits Limits
	// TempRoot is the directory under which working directories are created
	// (default os.TempDir()). It must be traversable by the sandbox user.
	TempRoot string
	// AllowUnsafe permits running without network isolation (the CLI's
	// --unsafe-code-exec). Without it, New fails on machines that cannot
	// create a network namespace.
	AllowUnsafe bool
}

// Spec is one program run.
type Spec struct {
	// Args is the command; Args[0] must be an absolute path (PATH lookup is
	// not done inside the sandbox).
	Args []string
	// Stdin is fed to the program's standard input.
	Stdin []byte
	// Files are written into the fresh working directory before the run,
	// keyed by base name.
	Files map[string][]byte
	// Limits override the sandbox's limits where non-zero.
	Limits Limits
}

// Result is the outcome of one run. A program that misbehaves yields a
// Result (not an error); errors are reserved for failures of the harness
// side (cannot create a directory, cannot start the shim).
type Result struct {
	Stdout, Stderr   []byte
	StdoutTruncated  bool
	StderrTruncated  bool
	ExitCode         int    // -1 when killed by a signal
	Signal           string // signal name when killed by a signal
	TimedOut         bool   // wall-clock timeout hit
	OutputExceeded   bool   // killed because an output cap was exceeded
	SetupError       string // the shim failed before exec (isolation could not be applied)
	Wall             time.Duration
	CPU              time.Duration // user+system time of the shim/program as reaped
	IsolationApplied string        // the Isolation.Level the run used
}

// OK reports whether the program ran to completion with exit status 0.
func (r Result) OK() bool {
	return r.SetupError == "" && !r.TimedOut && !r.OutputExceeded && r.ExitCode == 0
}

// Failure describes why a run did not succeed ("" when OK).
func (r Result) Failure() string {
	switch {
	case r.SetupError != "":
		return "sandbox setup failed: " + r.SetupError
	case r.TimedOut:
		return "wall-clock timeout"
	case r.OutputExceeded:
		return "output limit exceeded"
	case r.Signal == "SIGXCPU":
		return "cpu time limit exceeded"
	case r.Signal != "":
		return "killed by " + r.Signal
	case r.ExitCode != 0:
		return fmt.Sprintf("exit status %d", r.ExitCode)
	}
	return ""
}

// Sandbox runs programs with a fixed isolation mode and limits.
type Sandbox struct {
	cfg  Config
	iso  Isolation
	mode mode
}

// New probes the machine (once per process) and returns a sandbox. It fails
// when network isolation is unavailable and cfg.AllowUnsafe is false.
func New(cfg Config) (*Sandbox, error) {
	iso, m := probe()
	if !iso.Network && !cfg.AllowUnsafe {
		return nil, fmt.Errorf("sandbox: network isolation unavailable on this machine (%s); refusing to run generated code without --unsafe-code-exec", iso.Detail)
	}
	if cfg.TempRoot == "" {
		cfg.TempRoot = os.TempDir()
	}
	return &Sandbox{cfg: cfg, iso: iso, mode: m}, nil
}

// Isolation returns what the sandbox applies to every run.
func (s *Sandbox) Isolation() Isolation { return s.iso }

// Run executes spec in a fresh working directory that is removed afterwards.
func (s *Sandbox) Run(ctx context.Context, spec Spec) (Result, error) {
	if len(spec.Args) == 0 {
		return Result{}, errors.New("sandbox: empty command")
	}
	if !filepath.IsAbs(spec.Args[0]) {
		return Result{}, fmt.Errorf("sandbox: command %q is not an absolute path", spec.Args[0])
	}
	lim := s.cfg.Limits.withDefaults()
	lim = spec.Limits.overlay(lim)

	dir, err := os.MkdirTemp(s.cfg.TempRoot, "marlow-sbx-")
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: create working dir under %s: %w", s.cfg.TempRoot, err)
	}
	defer os.RemoveAll(dir)
	names := slices.Sorted(maps.Keys(spec.Files))
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "/\\") || n == "." || n == ".." {
			return Result{}, fmt.Errorf("sandbox: invalid file name %q", n)
		}
		if err := os.WriteFile(filepath.Join(dir, n), spec.Files[n], 0o644); err != nil {
			return Result{}, fmt.Errorf("sandbox: write %s: %w", n, err)
		}
	}
	return s.run(ctx, dir, spec, lim)
}

// overlay returns base with l's non-zero fields applied.
func (l Limits) overlay(base Limits) Limits {
	if l.Timeout > 0 {
		base.Timeout = l.Timeout
	}
	if l.CPUSeconds > 0 {
		base.CPUSeconds = l.CPUSeconds
	}
	if l.AddressSpace > 0 {
		base.AddressSpace = l.AddressSpace
	}
	if l.Processes > 0 {
		base.Processes = l.Processes
	}
	if l.OpenFiles > 0 {
		base.OpenFiles = l.OpenFiles
	}
	if l.FileSize > 0 {
		base.FileSize = l.FileSize
	}
	if l.OutputBytes > 0 {
		base.OutputBytes = l.OutputBytes
	}
	return base
}

// capWriter keeps at most max bytes and calls onOverflow once when more
// arrive. It never returns an error, so the copier keeps draining the pipe.
type capWriter struct {
	max        int
	buf        bytes.Buffer
	truncated  bool
	onOverflow func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.max - w.buf.Len()
	if len(p) <= room {
		w.buf.Write(p)
		return len(p), nil
	}
	if room > 0 {
		w.buf.Write(p[:room])
	}
	if !w.truncated {
		w.truncated = true
		if w.onOverflow != nil {
			w.onOverflow()
		}
	}
	return len(p), nil
}
