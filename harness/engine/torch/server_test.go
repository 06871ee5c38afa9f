package torch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
)

func TestServerPackageWrittenOnceAndRepaired(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	files, _, err := serverSources()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"__init__.py", "__main__.py", "protocol.py", "keyed.py", "sampling.py", "training.py"} {
		if _, ok := files[name]; !ok {
			t.Errorf("embedded server lacks %s", name)
		}
	}
	for name := range files {
		if strings.HasPrefix(name, "test_") {
			t.Errorf("embedded server holds the test %s", name)
		}
	}
	pkg, err := serverScript()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(pkg) != serverPackage || !strings.HasPrefix(filepath.Base(filepath.Dir(pkg)), "torch-server-") {
		t.Fatalf("server package at %s", pkg)
	}
	if !holdsFiles(pkg, files) {
		t.Fatalf("%s does not hold the embedded files", pkg)
	}
	main := filepath.Join(pkg, "__main__.py")
	before, _ := os.Stat(main)
	if again, err := serverScript(); err != nil || again != pkg {
		t.Fatalf("second call: %s, %v", again, err)
	}
	if after, _ := os.Stat(main); !after.ModTime().Equal(before.ModTime()) {
		t.Error("an intact copy was rewritten")
	}
	// A damaged copy is replaced; a stray file (Python's cache) is no damage.
	os.WriteFile(filepath.Join(pkg, "keyed.py"), []byte("# edited\n"), 0o644)
	os.Remove(filepath.Join(pkg, "sampling.py"))
	os.Mkdir(filepath.Join(pkg, "__pycache__"), 0o755)
	if again, err := serverScript(); err != nil || again != pkg {
		t.Fatalf("repair: %s, %v", again, err)
	}
	if !holdsFiles(pkg, files) {
		t.Fatal("damaged copy not repaired")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(pkg)), "*.tmp")); len(left) > 0 {
		t.Errorf("temporary folders left: %v", left)
	}
}

// TestServerPackageStarts runs the embedded package with the interpreter the
// tests use (hello needs no torch) and checks that it speaks the protocol
// and ends at close.
func TestServerPackageStarts(t *testing.T) {
	py := DefaultPython("")
	if _, err := exec.LookPath(py); err != nil {
		t.Skipf("no Python interpreter %s: %v", py, err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := Start(ctx, Options{Python: py, Stderr: &stderr})
	if err != nil {
		t.Fatalf("start: %v (stderr: %s)", err, stderr.String())
	}
	if h := e.Hello(); h.Protocol != Protocol || h.PID <= 0 || h.Versions["python"] == "" {
		t.Errorf("hello %+v", h)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("close: %v (stderr: %s)", err, stderr.String())
	}
}

// TestServerOutOfMemoryIsTyped injects a CUDA out-of-memory into the real
// server's second logprobs call (MARLOW_TORCH_INJECT_OOM): the client gets
// an error that matches engine.ErrOutOfMemory, names the operation, the
// batch and the budget to lower, and carries no traceback; the server
// stays usable.
func TestServerOutOfMemoryIsTyped(t *testing.T) {
	py := torchtest.Python(t, "torch")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("MARLOW_TORCH_INJECT_OOM", "logprobs:2")
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := Start(ctx, Options{Python: py, Stderr: &stderr})
	if err != nil {
		t.Fatalf("start: %v (stderr: %s)", err, stderr.String())
	}
	defer e.Close()
	turns := []engine.Turn{{PromptIDs: []int32{1, 2, 3}, CompletionIDs: []int32{4, 5}}, {PromptIDs: []int32{1}, CompletionIDs: []int32{6, 7, 8}}}
	// The first call is not the chosen one: it fails for want of a model.
	if _, err := e.LogProbs(ctx, "", turns, 1); err == nil || errors.Is(err, engine.ErrOutOfMemory) || !strings.Contains(err.Error(), "not_open") {
		t.Fatalf("first call: %v", err)
	}
	_, err = e.LogProbs(ctx, "", turns, 1)
	if !errors.Is(err, engine.ErrOutOfMemory) {
		t.Fatalf("second call: %v, want engine.ErrOutOfMemory", err)
	}
	msg := err.Error()
	for _, want := range []string{"logprobs: out_of_memory", "log-probs ran out of memory", "2 turns of 9 prompt + completion tokens", "lower train_tokens in the spec's model section"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "Traceback") {
		t.Errorf("error quotes the traceback:\n%s", msg)
	}
	if _, err := e.LogProbs(ctx, "", turns, 1); err == nil || errors.Is(err, engine.ErrOutOfMemory) {
		t.Fatalf("third call: %v", err)
	}
}
