//go:build linux

package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shimEnv is the sentinel environment variable that turns a re-executed
// harness binary into the sandbox shim. Its value is the JSON shimConfig.
const shimEnv = "MARLOW_SANDBOX_SHIM"

// shimErrFD is the descriptor on which the shim reports setup failures; it
// is close-on-exec, so a successful exec leaves the parent reading EOF.
const shimErrFD = 3

// shimExitSetup is the shim's exit status when setup fails.
const shimExitSetup = 125

// nobody is the unprivileged user and group the program runs as when the
// harness is root.
const nobody = 65534

type shimConfig struct {
	Args      []string
	Dir       string
	Env       []string
	Limits    Limits
	Drop      bool // switch to nobody before exec
	Mounts    bool // private mounts: read-only everything except Dir, fresh /proc
	ProcMount bool // mount a fresh /proc (needs a PID namespace)
	Probe     bool // apply the setup, then exit 0 instead of exec
}

func init() {
	if v, ok := os.LookupEnv(shimEnv); ok {
		runShim(v)
	}
}

// runShim applies isolation in the freshly cloned child and execs the
// program. It never returns.
func runShim(js string) {
	runtime.LockOSThread()
	errf := os.NewFile(shimErrFD, "sandbox-setup-errors")
	fail := func(format string, a ...any) {
		if errf != nil {
			fmt.Fprintf(errf, format, a...)
		}
		os.Exit(shimExitSetup)
	}
	syscall.CloseOnExec(shimErrFD)
	var c shimConfig
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		fail("decode shim config: %v", err)
	}
	if c.Mounts {
		if err := isolateMounts(c.Dir); err != nil {
			fail("%v", err)
		}
	}
	if c.ProcMount {
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			fail("mount /proc: %v", err)
		}
	}
	if err := os.Chdir(c.Dir); err != nil {
		fail("enter working dir: %v", err)
	}
	if c.Drop {
		if err := dropToNobody(); err != nil {
			fail("%v", err)
		}
	}
	// A credential change clears the parent-death signal; set it again so
	// the program dies with the harness.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fail("set parent-death signal: %v", err)
	}
	if len(c.Args) == 0 {
		fail("empty command")
	}
	l := c.Limits
	if err := setLimits(l); err != nil {
		fail("%v", err)
	}
	// The address-space limit comes last, right before exec, with the exec
	// arguments prepared beforehand: the Go runtime of this shim already
	// holds more virtual memory than a program's limit, so it must not
	// allocate once the limit is in place.
	argv0, err := syscall.BytePtrFromString(c.Args[0])
	if err != nil {
		fail("bad command: %v", err)
	}
	argv, err := syscall.SlicePtrFromStrings(c.Args)
	if err != nil {
		fail("bad arguments: %v", err)
	}
	envv, err := syscall.SlicePtrFromStrings(c.Env)
	if err != nil {
		fail("bad environment: %v", err)
	}
	if c.Probe {
		os.Exit(0)
	}
	as := unix.Rlimit{Cur: l.AddressSpace, Max: l.AddressSpace}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRLIMIT, unix.RLIMIT_AS, uintptr(unsafe.Pointer(&as)), 0); e != 0 {
		fail("set address space limit: %v", e)
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	fail("exec %s: %v", c.Args[0], e)
}

// isolateMounts makes the mounts private, binds the working folder onto
// itself and remounts every other mount point read-only (keeping nosuid,
// nodev and noexec).
func isolateMounts(dir string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind working dir: %w", err)
	}
	mps, err := mountPoints()
	if err != nil {
		return err
	}
	for _, mp := range mps {
		if mp.path == dir || strings.HasPrefix(mp.path, dir+"/") {
			continue
		}
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		for _, o := range strings.Split(mp.opts, ",") {
			switch o {
			case "nosuid":
				flags |= unix.MS_NOSUID
			case "nodev":
				flags |= unix.MS_NODEV
			case "noexec":
				flags |= unix.MS_NOEXEC
			}
		}
		if err := unix.Mount("", mp.path, "", flags, ""); err != nil {
			return fmt.Errorf("remount %s read-only: %w", mp.path, err)
		}
	}
	return nil
}

// dropToNobody clears the supplementary groups and becomes nobody.
func dropToNobody() error {
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("clear groups: %w", err)
	}
	if err := syscall.Setgid(nobody); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(nobody); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	return nil
}

// setLimits sets every resource limit but the address space (which comes
// right before exec).
func setLimits(l Limits) error {
	for _, r := range []struct {
		res  int
		name string
		cur  uint64
		max  uint64
	}{
		{unix.RLIMIT_CPU, "cpu", l.CPUSeconds, l.CPUSeconds + 1},
		{unix.RLIMIT_NPROC, "processes", l.Processes, l.Processes},
		{unix.RLIMIT_NOFILE, "open files", l.OpenFiles, l.OpenFiles},
		{unix.RLIMIT_FSIZE, "file size", l.FileSize, l.FileSize},
		{unix.RLIMIT_CORE, "core", 0, 0},
	} {
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: r.cur, Max: r.max}); err != nil {
			return fmt.Errorf("set %s limit: %w", r.name, err)
		}
	}
	return nil
}

type mountPoint struct {
	path string
	opts string
}

// mountPoints lists the mount points of the current mount namespace from
// /proc/self/mountinfo.
func mountPoints() ([]mountPoint, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var out []mountPoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		out = append(out, mountPoint{path: filepath.Clean(unescapeMount(fields[4])), opts: fields[5]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return out, nil
}

// unescapeMount decodes the octal escapes (\040 etc.) of mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
