//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no system python3")
	return ""
}

// newTestSandbox returns a sandbox whose working dirs live under a fresh
// directory (traversable by the sandbox user) holding a canary file.
func newTestSandbox(t *testing.T) (*Sandbox, string) {
	t.Helper()
	iso := Probe()
	if !iso.Network {
		t.Skipf("no network isolation here: %s", iso.Detail)
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(root), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "canary"), []byte("alive"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := New(Config{TempRoot: root, Limits: Limits{
		Timeout: 2 * time.Second, CPUSeconds: 1, AddressSpace: 512 << 20,
		Processes: 32, OutputBytes: 64 << 10,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return sb, root
}

func TestProbeReportsLevel(t *testing.T) {
	iso := Probe()
	if iso.Level == "" {
		t.Fatal("empty isolation level")
	}
	if iso.Network != !strings.Contains(iso.Level, "UNSAFE") {
		t.Fatalf("level %q disagrees with Network=%v", iso.Level, iso.Network)
	}
	t.Logf("isolation: %s (detail: %s)", iso.Level, iso.Detail)
}

func TestRunBasic(t *testing.T) {
	py := python(t)
	sb, _ := newTestSandbox(t)
	res, err := sb.Run(context.Background(), Spec{
		Args:  []string{py, "-I", "main.py"},
		Stdin: []byte("3 4\n"),
		Files: map[string][]byte{"main.py": []byte("a,b=map(int,input().split())\nprint(a+b)\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || strings.TrimSpace(string(res.Stdout)) != "7" {
		t.Fatalf("got %+v stderr=%s", res, res.Stderr)
	}
}

func TestRunRejectsBadSpec(t *testing.T) {
	sb, _ := newTestSandbox(t)
	for _, spec := range []Spec{
		{},
		{Args: []string{"python3"}},
		{Args: []string{"/bin/true"}, Files: map[string][]byte{"../x": nil}},
	} {
		if _, err := sb.Run(context.Background(), spec); err == nil {
			t.Errorf("spec %+v: want error", spec)
		}
	}
}

// TestHostile runs programs that attack the machine and checks that each
// is contained: the run fails (or its attack had no effect) and the harness
// side is untouched.
func TestHostile(t *testing.T) {
	py := python(t)
	sb, root := newTestSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	t.Setenv("MARLOW_TEST_SECRET", "hunter2-secret")
	outside := filepath.Join(os.TempDir(), "marlow-sbx-escape-test")
	os.Remove(outside)

	cases := []struct {
		name  string
		code  string
		check func(t *testing.T, r Result)
	}{
		{"infinite loop", "while True:\n    pass\n", func(t *testing.T, r Result) {
			if r.OK() || r.Wall > 3*time.Second {
				t.Errorf("not stopped in time: %+v", r)
			}
		}},
		{"fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", func(t *testing.T, r Result) {
			if r.OK() {
				t.Errorf("fork bomb succeeded")
			}
		}},
		{"8 GB allocation", "x = bytearray(8 << 30)\nprint(len(x))\n", func(t *testing.T, r Result) {
			if r.OK() || !strings.Contains(string(r.Stderr), "MemoryError") {
				t.Errorf("allocation not refused: %+v stderr=%s", r, r.Stderr)
			}
		}},
		{"write outside temp dir", "for p in ['" + outside + "', '../escape', '/etc/marlow-escape']:\n    try:\n        open(p, 'w').write('x')\n        print('wrote', p)\n    except OSError as e:\n        print('denied', p)\n", func(t *testing.T, r Result) {
			if strings.Contains(string(r.Stdout), "wrote") {
				t.Errorf("write escaped: %s", r.Stdout)
			}
			for _, p := range []string{outside, filepath.Join(root, "escape"), "/etc/marlow-escape"} {
				if _, err := os.Stat(p); err == nil {
					os.Remove(p)
					t.Errorf("file %s created", p)
				}
			}
		}},
		{"connect to host loopback", "import socket\ns = socket.create_connection(('127.0.0.1', " + strconv.Itoa(port) + "), timeout=1)\nprint('connected')\n", func(t *testing.T, r Result) {
			if r.OK() || strings.Contains(string(r.Stdout), "connected") {
				t.Errorf("connection succeeded: %+v", r)
			}
			select {
			case <-accepted:
				t.Errorf("listener accepted a connection from the sandbox")
			default:
			}
		}},
		{"print 1 GB", "import sys\nb = 'x' * 65536\nfor _ in range(16384):\n    sys.stdout.write(b)\n", func(t *testing.T, r Result) {
			if r.OK() || !r.StdoutTruncated || !r.OutputExceeded || len(r.Stdout) != 64<<10 {
				t.Errorf("output not capped: ok=%v trunc=%v exceeded=%v len=%d", r.OK(), r.StdoutTruncated, r.OutputExceeded, len(r.Stdout))
			}
		}},
		{"delete in parent", "import os\nfor p in ['../canary']:\n    try:\n        os.remove(p)\n        print('deleted')\n    except OSError:\n        print('denied')\n", func(t *testing.T, r Result) {
			if _, err := os.Stat(filepath.Join(root, "canary")); err != nil {
				t.Errorf("canary deleted: %v", err)
			}
		}},
		{"read harness env", "import os\nprint(dict(os.environ))\nfor p in ['/proc/1/environ', '/proc/self/environ']:\n    try:\n        print(open(p).read())\n    except OSError:\n        pass\n", func(t *testing.T, r Result) {
			if strings.Contains(string(r.Stdout), "hunter2") {
				t.Errorf("secret leaked: %s", r.Stdout)
			}
		}},
		{"sleep past timeout", "import time\ntime.sleep(30)\n", func(t *testing.T, r Result) {
			if r.OK() || !r.TimedOut || r.Wall > 4*time.Second {
				t.Errorf("sleep not cut: %+v", r)
			}
		}},
		{"background process outlives", "import subprocess\nsubprocess.Popen(['/bin/sleep', '31.4159'], start_new_session=True)\nprint('spawned')\n", func(t *testing.T, r Result) {
			deadline := time.Now().Add(2 * time.Second)
			for {
				n := countProcs("31.4159")
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%d background processes survived", n)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := sb.Run(context.Background(), Spec{
				Args:  []string{py, "-I", "main.py"},
				Files: map[string][]byte{"main.py": []byte(tc.code)},
			})
			if err != nil {
				t.Fatalf("harness error: %v", err)
			}
			if res.SetupError != "" {
				t.Fatalf("setup error: %s", res.SetupError)
			}
			t.Logf("failure=%q exit=%d signal=%q wall=%v cpu=%v stdout=%.200q stderr=%.200q", res.Failure(), res.ExitCode, res.Signal, res.Wall, res.CPU, res.Stdout, res.Stderr)
			tc.check(t, res)
		})
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "canary" {
			t.Errorf("left behind in temp root: %s", e.Name())
		}
	}
}

// countProcs counts processes whose command line contains marker.
func countProcs(marker string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			n++
		}
	}
	return n
}

// TestContainment checks the individual mechanisms: process limit, PID
// namespace, scrubbed environment, file size limit and exit statuses.
func TestContainment(t *testing.T) {
	py := python(t)
	sb, _ := newTestSandbox(t)
	cases := []struct {
		name   string
		code   string
		limits Limits
		check  func(r Result) bool
	}{
		{"process limit", "import os, time\nn = 0\nfor i in range(100):\n    try:\n        if os.fork() == 0:\n            time.sleep(5)\n            os._exit(0)\n        n += 1\n    except OSError:\n        break\nprint('forked', n)\n",
			Limits{Processes: 8}, func(r Result) bool {
				var n int
				_, err := fmt.Sscanf(string(r.Stdout), "forked %d", &n)
				return err == nil && n < 8
			}},
		{"pid namespace", "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n",
			Limits{}, func(r Result) bool { return strings.TrimSpace(string(r.Stdout)) == "[1]" }},
		{"scrubbed environment", "import os\nprint(sorted(os.environ))\n",
			Limits{}, func(r Result) bool {
				return strings.TrimSpace(string(r.Stdout)) == "['HOME', 'LANG', 'PATH', 'PYTHONDONTWRITEBYTECODE', 'PYTHONHASHSEED', 'PYTHONIOENCODING', 'TMPDIR']"
			}},
		{"unprivileged", "import os\nprint(os.getuid(), os.getgid())\n",
			Limits{}, func(r Result) bool { return strings.TrimSpace(string(r.Stdout)) == "65534 65534" }},
		{"file size limit", "import signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\ntry:\n    open('big', 'wb').write(b'x' * (2 << 20))\n    print('wrote')\nexcept OSError:\n    print('refused')\n",
			Limits{FileSize: 1 << 20}, func(r Result) bool { return strings.TrimSpace(string(r.Stdout)) == "refused" }},
		{"working dir writable", "open('f', 'w').write('ok')\nprint(open('f').read())\n",
			Limits{}, func(r Result) bool { return r.OK() && strings.TrimSpace(string(r.Stdout)) == "ok" }},
		{"exit status", "import sys\nsys.exit(3)\n",
			Limits{}, func(r Result) bool { return r.ExitCode == 3 && r.Failure() == "exit status 3" }},
		{"stderr capped", "import sys\nsys.stderr.write('e' * 200000)\n",
			Limits{}, func(r Result) bool { return r.StderrTruncated && r.OutputExceeded && len(r.Stderr) == 64<<10 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := sb.Run(context.Background(), Spec{
				Args:   []string{py, "-I", "main.py"},
				Files:  map[string][]byte{"main.py": []byte(tc.code)},
				Limits: tc.limits,
			})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(res) {
				t.Fatalf("failure=%q exit=%d stdout=%.300q stderr=%.300q", res.Failure(), res.ExitCode, res.Stdout, res.Stderr)
			}
		})
	}
}

func TestNewRefusesWithoutNetworkIsolation(t *testing.T) {
	Probe() // run the real probe first so that restoring it is exact
	saved := probeIso
	probeIso = Isolation{Level: "rlimits (UNSAFE: no network isolation)", Detail: "test"}
	defer func() { probeIso = saved }()
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "--unsafe-code-exec") {
		t.Fatalf("want refusal, got %v", err)
	}
	if _, err := New(Config{AllowUnsafe: true}); err != nil {
		t.Fatalf("AllowUnsafe refused: %v", err)
	}
}
