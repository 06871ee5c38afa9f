//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// mode is one way of starting the shim.
type mode struct {
	cloneflags uintptr
	userns     bool
	mounts     bool
	procMount  bool
	drop       bool
}

var (
	probeOnce sync.Once
	probeIso  Isolation
	probeMode mode
)

// Probe detects, once per process, the strongest isolation this machine
// allows, by starting the shim in each candidate mode.
func Probe() Isolation {
	iso, _ := probe()
	return iso
}

func probe() (Isolation, mode) {
	probeOnce.Do(func() { probeIso, probeMode = detect() })
	return probeIso, probeMode
}

func detect() (Isolation, mode) {
	root := os.Geteuid() == 0
	ns := uintptr(unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC)
	var cands []mode
	if root {
		cands = []mode{
			{cloneflags: ns, mounts: true, procMount: true, drop: true},
			{cloneflags: ns, procMount: true, drop: true},
			{cloneflags: ns, drop: true},
			{cloneflags: unix.CLONE_NEWNET, drop: true},
		}
	} else {
		cands = []mode{
			{cloneflags: ns | unix.CLONE_NEWUSER, userns: true, mounts: true, procMount: true},
			{cloneflags: ns | unix.CLONE_NEWUSER, userns: true, procMount: true},
			{cloneflags: ns | unix.CLONE_NEWUSER, userns: true},
			{cloneflags: unix.CLONE_NEWNET | unix.CLONE_NEWUSER, userns: true},
		}
	}
	var why []string
	for _, m := range cands {
		if err := tryMode(m); err != nil {
			why = append(why, fmt.Sprintf("%s: %v", describe(m, false), err))
			continue
		}
		return isolationOf(m, strings.Join(why, "; ")), m
	}
	m := mode{drop: root}
	return isolationOf(m, strings.Join(why, "; ")), m
}

func isolationOf(m mode, detail string) Isolation {
	return Isolation{
		Level:        describe(m, true),
		Network:      m.cloneflags&unix.CLONE_NEWNET != 0,
		PID:          m.cloneflags&unix.CLONE_NEWPID != 0,
		Mount:        m.cloneflags&unix.CLONE_NEWNS != 0,
		IPC:          m.cloneflags&unix.CLONE_NEWIPC != 0,
		ReadOnlyFS:   m.mounts,
		Unprivileged: m.drop,
		Detail:       detail,
	}
}

func describe(m mode, final bool) string {
	var parts []string
	for _, f := range []struct {
		flag uintptr
		name string
	}{{unix.CLONE_NEWUSER, "userns"}, {unix.CLONE_NEWNET, "netns"}, {unix.CLONE_NEWPID, "pidns"}, {unix.CLONE_NEWNS, "mntns"}, {unix.CLONE_NEWIPC, "ipcns"}} {
		if m.cloneflags&f.flag != 0 {
			parts = append(parts, f.name)
		}
	}
	if m.mounts {
		parts = append(parts, "rofs")
	}
	if m.drop {
		parts = append(parts, "nobody")
	}
	parts = append(parts, "rlimits")
	s := strings.Join(parts, "+")
	if final && m.cloneflags&unix.CLONE_NEWNET == 0 {
		s += " (UNSAFE: no network isolation)"
	}
	return s
}

// tryMode runs the shim in probe mode.
func tryMode(m mode) error {
	dir, err := os.MkdirTemp("", "marlow-sbx-probe-")
	if err != nil {
		return fmt.Errorf("create probe dir: %w", err)
	}
	defer os.RemoveAll(dir)
	s := &Sandbox{cfg: Config{TempRoot: os.TempDir()}, mode: m}
	res, err := s.start(context.Background(), dir, Spec{Args: []string{"/bin/true"}}, DefaultLimits.withDefaults(), true)
	if err != nil {
		return err
	}
	if res.SetupError != "" {
		return errors.New(res.SetupError)
	}
	if !res.OK() {
		return fmt.Errorf("probe shim failed: %s %s", res.Failure(), bytes.TrimSpace(res.Stderr))
	}
	return nil
}

func (s *Sandbox) run(ctx context.Context, dir string, spec Spec, lim Limits) (Result, error) {
	res, err := s.start(ctx, dir, spec, lim, false)
	res.IsolationApplied = s.iso.Level
	return res, err
}

// scrubbedEnv is the whole environment a program sees.
func scrubbedEnv(dir string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + dir,
		"TMPDIR=" + dir,
		"LANG=C.UTF-8",
		"PYTHONHASHSEED=0",
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONIOENCODING=utf-8",
	}
}

// prepareDir gives the working folder to the sandbox user (when it drops
// privileges) and closes it to others.
func prepareDir(dir string, drop bool) error {
	if drop {
		if err := os.Chown(dir, nobody, nobody); err != nil {
			return fmt.Errorf("sandbox: hand working dir to the sandbox user: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox: chmod working dir: %w", err)
	}
	return nil
}

// shimCommand is this binary re-executed as the sandbox shim with config
// js, in the namespaces of mode m, with setup errors reported on errW.
func shimCommand(m mode, js []byte, stdin []byte, stdout, stderr io.Writer, errW *os.File) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"marlow-sandbox"},
		Env:        []string{shimEnv + "=" + string(js)},
		Stdin:      bytes.NewReader(stdin),
		Stdout:     stdout,
		Stderr:     stderr,
		ExtraFiles: []*os.File{errW},
		WaitDelay:  time.Second,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: m.cloneflags,
			Setpgid:    true,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if m.userns {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return cmd
}

func (s *Sandbox) start(ctx context.Context, dir string, spec Spec, lim Limits, probeOnly bool) (Result, error) {
	m := s.mode
	if err := prepareDir(dir, m.drop); err != nil {
		return Result{}, err
	}
	cfg := shimConfig{
		Args: spec.Args, Dir: dir, Env: scrubbedEnv(dir), Limits: lim,
		Drop: m.drop, Mounts: m.mounts, ProcMount: m.procMount, Probe: probeOnly,
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: encode shim config: %w", err)
	}
	runCtx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	var overflow, timedOut atomic.Bool
	onOverflow := func() { overflow.Store(true); cancel() }
	stdout := &capWriter{max: lim.OutputBytes, onOverflow: onOverflow}
	stderr := &capWriter{max: lim.OutputBytes, onOverflow: onOverflow}

	errR, errW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: setup pipe: %w", err)
	}
	defer errR.Close()
	cmd := shimCommand(m, js, spec.Stdin, stdout, stderr, errW)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		errW.Close()
		return Result{}, fmt.Errorf("sandbox: start shim: %w", err)
	}
	errW.Close()
	pid := cmd.Process.Pid
	done := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		select {
		case <-runCtx.Done():
			if ctx.Err() == nil && !overflow.Load() {
				timedOut.Store(true)
			}
			// The namespace init (or, without a PID namespace, the process
			// group) takes everything with it.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	setupMsg, _ := io.ReadAll(errR)
	waitErr := cmd.Wait()
	close(done)
	<-killed
	res := Result{
		Stdout:          stdout.buf.Bytes(),
		Stderr:          stderr.buf.Bytes(),
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
		Wall:            time.Since(t0),
		OutputExceeded:  overflow.Load(),
	}
	if m.cloneflags&unix.CLONE_NEWPID == 0 {
		// Without a PID namespace, sweep the process group once more for
		// stragglers that outlived the program.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if cmd.ProcessState == nil {
		return res, fmt.Errorf("sandbox: wait for program: %w", waitErr)
	}
	st := cmd.ProcessState
	res.CPU = st.UserTime() + st.SystemTime()
	res.ExitCode = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = unix.SignalName(ws.Signal())
	}
	if len(setupMsg) > 0 {
		res.SetupError = string(setupMsg)
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("sandbox: run cancelled: %w", ctx.Err())
	}
	res.TimedOut = timedOut.Load()
	return res, nil
}
