//go:build unix

package torch

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
)

// The protocol tests start the test binary itself as a fake server (no
// Python, no torch): TestMain turns into the server when
// MARLOW_TORCH_FAKE names a behaviour.

func TestMain(m *testing.M) {
	if mode := os.Getenv("MARLOW_TORCH_FAKE"); mode != "" {
		fakeServer(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fakeServer(mode string) {
	in, out := os.NewFile(3, "requests"), os.NewFile(4, "replies")
	send := func(v any) {
		if err := writeFrame(out, v); err != nil {
			fmt.Fprintln(os.Stderr, "fake: write:", err)
			os.Exit(3)
		}
	}
	for {
		b, err := readFrame(in)
		if err != nil {
			return
		}
		var req struct {
			ID   int64           `json:"id"`
			Op   string          `json:"op"`
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			fmt.Fprintln(os.Stderr, "fake: bad request:", err)
			os.Exit(3)
		}
		res := func(v any) { send(map[string]any{"id": req.ID, "result": v}) }
		fmt.Printf("fake: stdout noise while handling %s\n", req.Op) // must not reach the protocol
		switch req.Op {
		case "hello":
			cvd, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES")
			if !ok {
				cvd = "(unset)"
			}
			res(map[string]any{"protocol": Protocol, "versions": map[string]string{"torch": "fake", "transformers": "fake", "peft": "fake", "CUDA_VISIBLE_DEVICES": cvd}, "pid": os.Getpid()})
			continue
		case "open":
			res(map[string]any{"device": "cpu", "dtype": "float32", "vocab_size": 99})
			continue
		case "close":
			res(map[string]any{})
			return
		case "add_adapter":
			res(map[string]any{})
			continue
		}
		switch mode {
		case "ok":
			switch req.Op {
			case "generate":
				res(map[string]any{"completions": []map[string]any{{
					"prompt_ids": encodeInts([]int32{1, 2, 3}), "ids": encodeInts([]int32{4, 98}),
					"text": "x", "logprobs": encodeFloats([]float32{-0.5, -1.25}), "finish": "stop"}}})
			case "train_step":
				// NaN statistics travel as null.
				stats := map[string]any{"role": "*", "loss": 0.5, "grad_norm": 2.0, "grad_share": 1.0,
					"agent_cos_mean": nil, "agent_cos_min": nil, "role_cos": map[string]any{"evaluator": nil},
					"tokens": 3, "seqs": 1, "mean_len": 3.0, "entropy": 1.0, "perplexity": 2.0,
					"ratio_mean": 1.0, "ratio_max": 1.0, "clip_frac": 0.0, "kl": 0.0}
				role := map[string]any{}
				for k, v := range stats {
					role[k] = v
				}
				role["role"] = "generator"
				res(map[string]any{"total": stats, "roles": []any{role}, "grad_norm_pre": 2.0, "skipped": 1})
			case "logprobs":
				res(map[string]any{"logprobs": []string{encodeFloats([]float32{-0.25})}})
			case "stats":
				res(map[string]any{"cpu_seconds": 1.5, "peak_rss_bytes": 1000, "gen_pool": map[string]any{
					"blocks": 10, "block_tokens": 16, "pool_bytes": 4096, "peak_blocks": 6, "steps": 4, "row_steps": 12,
					"used_token_steps": 80, "prefills": 2, "requests": 5, "calls": 1}})
			default:
				send(map[string]any{"id": req.ID, "error": map[string]any{"kind": "bad_request", "message": "unknown op " + req.Op, "traceback": ""}})
			}
		case "error":
			send(map[string]any{"id": req.ID, "error": map[string]any{"kind": "RuntimeError", "message": "CUDA out of memory",
				"traceback": "Traceback (most recent call last):\n  File \"server.py\", line 1\nRuntimeError: CUDA out of memory"}})
		case "crash":
			fmt.Fprintln(os.Stderr, "fake: loading shards")
			fmt.Fprintln(os.Stderr, "fake: Segmentation fault in the kernel")
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		case "stall", "cancel":
			// A worker in the same process group, which killing the group must end.
			child := exec.Command("sleep", "600")
			if err := child.Start(); err == nil {
				if f := os.Getenv("MARLOW_TORCH_FAKE_PIDFILE"); f != "" {
					os.WriteFile(f, []byte(strconv.Itoa(child.Process.Pid)), 0o644)
				}
			}
			fmt.Fprintln(os.Stderr, "fake: stuck in a collective")
			select {}
		case "progress":
			for i := 0; i < 12; i++ {
				time.Sleep(50 * time.Millisecond)
				send(map[string]any{"id": req.ID, "progress": map[string]any{"tokens": i}})
			}
			res(map[string]any{"logprobs": []string{encodeFloats([]float32{-0.25})}})
		case "garbage":
			out.Write([]byte{5, 0, 0, 0, 'n', 'o', 't', 'j', 's'})
		case "wrongid":
			send(map[string]any{"id": req.ID + 7, "result": map[string]any{}})
		}
	}
}

// fakeOpen starts the fake server in mode.
func fakeOpen(t *testing.T, mode string, opt Options) *Engine {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MARLOW_TORCH_FAKE", mode)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	opt.argv = []string{exe}
	e, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatalf("open fake server (%s): %v", mode, err)
	}
	t.Cleanup(func() { e.Kill(); e.Close() })
	return e
}

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	msgs := []any{map[string]any{"id": 1, "op": "hello"}, map[string]any{"id": 2, "args": strings.Repeat("x", 70000)}}
	for _, m := range msgs {
		if err := writeFrame(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range msgs {
		b, err := readFrame(&buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		want, _ := json.Marshal(msgs[i])
		if !bytes.Equal(b, want) {
			t.Fatalf("frame %d: got %.40q, want %.40q", i, b, want)
		}
	}
	if _, err := readFrame(&buf); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	// A frame cut short, and a length beyond the limit.
	var short bytes.Buffer
	writeFrame(&short, map[string]any{"id": 1})
	cut := short.Bytes()[:short.Len()-2]
	if _, err := readFrame(bytes.NewReader(cut)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut frame: %v, want io.ErrUnexpectedEOF", err)
	}
	huge := make([]byte, 4)
	binary.LittleEndian.PutUint32(huge, 0xffffffff)
	if _, err := readFrame(bytes.NewReader(huge)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("huge length: %v", err)
	}
}

func TestArraysAndNaN(t *testing.T) {
	ids := []int32{0, 1, -5, 151935, math.MaxInt32}
	got, err := decodeInts(encodeInts(ids))
	if err != nil || fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("ints: %v %v", got, err)
	}
	fs := []float32{0, -1.5, float32(math.Inf(-1)), 3.4e38, float32(math.SmallestNonzeroFloat32)}
	gf, err := decodeFloats(encodeFloats(fs))
	if err != nil || fmt.Sprint(gf) != fmt.Sprint(fs) {
		t.Fatalf("floats: %v %v", gf, err)
	}
	if _, err := decodeInts("AAA="); err == nil {
		t.Fatal("3-byte token array accepted")
	}
	b, _ := json.Marshal(struct{ X num }{num(math.NaN())})
	if string(b) != `{"X":null}` {
		t.Fatalf("NaN encodes as %s", b)
	}
	var v struct{ X, Y num }
	if err := json.Unmarshal([]byte(`{"X":null,"Y":1.5}`), &v); err != nil || !math.IsNaN(float64(v.X)) || v.Y != 1.5 {
		t.Fatalf("decode null: %v %v", v, err)
	}
}

func TestFakeServerCalls(t *testing.T) {
	e := fakeOpen(t, "ok", Options{})
	if e.Hello().Versions["torch"] != "fake" || e.Info().Device != "cpu" {
		t.Fatalf("hello %+v info %+v", e.Hello(), e.Info())
	}
	if err := e.NewAdapter(context.Background(), "gen", engine.AdapterConfig{Rank: 2, Alpha: 4}); err != nil {
		t.Fatal(err)
	}
	comps, err := e.Generate(context.Background(), []engine.Request{{Adapter: "gen", Temperature: 0.7, MaxNewTokens: 4}})
	if err != nil {
		t.Fatal(err)
	}
	c := comps[0]
	if fmt.Sprintf("%v %v %v %s %s", c.PromptIDs, c.IDs, c.LogProbs, c.Finish, c.Text) != "[1 2 3] [4 98] [-0.5 -1.25] stop x" {
		t.Fatalf("completion %+v", c)
	}
	turn := engine.Turn{Adapter: "gen", Role: "generator", Agent: "generator0", PromptIDs: []int32{1}, CompletionIDs: []int32{2}, OldLogProbs: []float32{-1}, Advantage: 1}
	st, err := e.TrainStep(context.Background(), "gen", []engine.Turn{turn}, engine.TrainOptions{LossAgg: engine.TokenMean, Temperature: 1, Eps: 1e-8})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(st.Total.AgentCosMean) || !math.IsNaN(st.Roles[0].RoleCos["evaluator"]) || st.Total.GradNorm != 2 || st.SkippedTurns != 1 || st.Roles[0].Role != "generator" {
		t.Fatalf("stats %+v", st)
	}
	lps, err := e.LogProbs(context.Background(), "", []engine.Turn{turn}, 1)
	if err != nil || lps[0][0] != -0.25 {
		t.Fatalf("logprobs %v %v", lps, err)
	}
	u, err := e.Usage(context.Background())
	if err != nil || u.CPUSeconds != 1.5 || u.GenPool == nil || u.GenPool.Prefills != 2 || u.GenPool.MeanBatch() != 3 || u.GenPool.MeanOccupancy() != 0.125 {
		t.Fatalf("usage %+v %+v %v", u, u.GenPool, err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := e.Generate(context.Background(), nil); err == nil {
		t.Fatal("generate after close succeeded")
	}
}

func TestServerErrorCarriesTraceback(t *testing.T) {
	e := fakeOpen(t, "error", Options{})
	_, err := e.LogProbs(context.Background(), "", []engine.Turn{{PromptIDs: []int32{1}, CompletionIDs: []int32{2}}}, 1)
	var se *ServerError
	if !errors.As(err, &se) || se.Op != "logprobs" || se.Kind != "RuntimeError" || !strings.Contains(err.Error(), "Traceback") {
		t.Fatalf("error %v", err)
	}
	// A reported error leaves the server usable.
	if _, err := e.LogProbs(context.Background(), "", nil, 1); !errors.As(err, &se) {
		t.Fatalf("second call: %v", err)
	}
}

func TestServerDeathIsNamedError(t *testing.T) {
	e := fakeOpen(t, "crash", Options{})
	start := time.Now()
	_, err := e.LogProbs(context.Background(), "", nil, 1)
	if err == nil {
		t.Fatal("call on a crashing server succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"logprobs", "server died", "killed", "Segmentation fault in the kernel"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("death took %v to notice", time.Since(start))
	}
	if _, err := e.LogProbs(context.Background(), "", nil, 1); err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Fatalf("call after death: %v", err)
	}
}

func TestStallIsError(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	t.Setenv("MARLOW_TORCH_FAKE_PIDFILE", pidFile)
	e := fakeOpen(t, "stall", Options{StallTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := e.LogProbs(context.Background(), "", nil, 1)
	if err == nil || !strings.Contains(err.Error(), "no progress") || !strings.Contains(err.Error(), "stuck in a collective") {
		t.Fatalf("stall: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stall noticed after %v", d)
	}
	waitGone(t, pidFile)
}

func TestProgressKeepsCallAlive(t *testing.T) {
	// 600 ms of work with a progress frame every 50 ms under a 300 ms stall limit.
	e := fakeOpen(t, "progress", Options{StallTimeout: 300 * time.Millisecond})
	lps, err := e.LogProbs(context.Background(), "", []engine.Turn{{PromptIDs: []int32{1}, CompletionIDs: []int32{2}}}, 1)
	if err != nil || lps[0][0] != -0.25 {
		t.Fatalf("%v %v", lps, err)
	}
}

func TestCancelKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	t.Setenv("MARLOW_TORCH_FAKE_PIDFILE", pidFile)
	e := fakeOpen(t, "cancel", Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(pidFile); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	_, err := e.Generate(ctx, []engine.Request{{Temperature: 1}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled generate: %v", err)
	}
	waitGone(t, pidFile)
}

func TestProtocolViolations(t *testing.T) {
	for _, mode := range []string{"garbage", "wrongid"} {
		t.Run(mode, func(t *testing.T) {
			e := fakeOpen(t, mode, Options{StallTimeout: 5 * time.Second})
			_, err := e.LogProbs(context.Background(), "", nil, 1)
			if err == nil || !strings.Contains(err.Error(), "logprobs") {
				t.Fatalf("%s: %v", mode, err)
			}
		})
	}
}

func TestClientSideValidation(t *testing.T) {
	e := fakeOpen(t, "ok", Options{})
	for name, err := range map[string]error{
		"empty adapter name": e.NewAdapter(context.Background(), "", engine.AdapterConfig{Rank: 1, Alpha: 1}),
		"adapter path name":  e.NewAdapter(context.Background(), "a/b", engine.AdapterConfig{Rank: 1, Alpha: 1}),
	} {
		if err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := e.Generate(context.Background(), []engine.Request{{Temperature: 0}}); err == nil {
		t.Error("temperature 0 accepted")
	}
	if _, err := e.Generate(context.Background(), []engine.Request{{Adapter: "nope", Temperature: 1}}); err == nil {
		t.Error("unknown adapter accepted")
	}
	if _, err := e.TrainStep(context.Background(), "nope", nil, engine.TrainOptions{}); err == nil {
		t.Error("train step on unknown adapter accepted")
	}
	turn := engine.Turn{Agent: "generator1", PromptIDs: []int32{1}}
	if _, err := e.LogProbs(context.Background(), "", []engine.Turn{turn}, 1); err == nil || !strings.Contains(err.Error(), `turn 0 (agent "generator1") has an empty completion`) {
		t.Errorf("turn without a completion: %v", err)
	}
	if _, err := e.LogProbs(context.Background(), "", nil, 0); err == nil || !strings.Contains(err.Error(), "temperature 0") {
		t.Errorf("scoring temperature 0: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(context.Background(), t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("open of an empty folder: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
	if _, err := Open(context.Background(), dir, Options{Python: "/nonexistent/python"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/python") {
		t.Fatalf("open with a missing interpreter: %v", err)
	}
}

func TestCheckMissingInterpreter(t *testing.T) {
	_, missing := Check(context.Background(), "/nonexistent/python3", "cuda")
	if len(missing) != 1 || !strings.Contains(missing[0], "/nonexistent/python3") {
		t.Fatalf("missing %v", missing)
	}
}

func TestVersionLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{{"4.50.3", "4.51", true}, {"4.51", "4.51", false}, {"5.17.0", "4.51", false}, {"2.11.0+cu130", "2.4", false}, {"0.9", "0.14", true}, {"1.0rc1", "1.0", false}} {
		if got := versionLess(c.a, c.b); got != c.less {
			t.Errorf("versionLess(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

// waitGone waits for the process whose pid is in file to disappear.
func waitGone(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the fake server did not start its worker: %v", err)
	}
	pid, _ := strconv.Atoi(string(b))
	for i := 0; i < 250; i++ {
		// The worker is a grandchild of this test: once killed it is reparented
		// and reaped by init, so kill(pid, 0) starts failing.
		if err := syscall.Kill(pid, 0); err != nil {
			return
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if f := strings.Fields(string(st)); len(f) > 2 && f[2] == "Z" {
				return // killed, not yet reaped by its new parent
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("worker %d of the server's process group is still alive", pid)
}

// TestVisibleDevicesPinTheServer checks that a pinned server sees only its
// GPUs through CUDA_VISIBLE_DEVICES, over the parent's own list, and that
// an unpinned one inherits the parent's.
func TestVisibleDevicesPinTheServer(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
	for _, tc := range []struct {
		pin  []string
		want string
	}{
		{nil, "0,1,2,3"},
		{[]string{"2"}, "2"},
		{[]string{"GPU-5e1f", "GPU-77aa"}, "GPU-5e1f,GPU-77aa"},
	} {
		e := fakeOpen(t, "ok", Options{VisibleDevices: tc.pin})
		if got := e.Hello().Versions["CUDA_VISIBLE_DEVICES"]; got != tc.want {
			t.Errorf("pinned to %v: the server sees CUDA_VISIBLE_DEVICES=%q, want %q", tc.pin, got, tc.want)
		}
	}
}

func TestDeviceIDs(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		visible *string
		count   int
		want    string
	}{
		{nil, 0, ""},
		{nil, 3, "0,1,2"},
		{str("3"), 1, "3"}, // a Slurm task's one GPU
		{str("GPU-aa, GPU-bb"), 2, "GPU-aa,GPU-bb"}, // UUIDs, spaces trimmed
		{str("5,7"), 1, "5"},                        // CUDA stopped at an invalid entry
		{str(""), 0, ""},
	} {
		if got := strings.Join(deviceIDs(tc.visible, tc.count), ","); got != tc.want {
			t.Errorf("deviceIDs(%v, %d) = %q, want %q", tc.visible, tc.count, got, tc.want)
		}
	}
}

// TestDevicesOnThisMachine lists the GPUs with the tests' interpreter: on a
// machine without an NVIDIA driver the list is empty and torch is not
// imported; where there are GPUs each has an ID and a name.
func TestDevicesOnThisMachine(t *testing.T) {
	py := DefaultPython("")
	if _, err := exec.LookPath(py); err != nil {
		t.Skipf("no Python interpreter %s: %v", py, err)
	}
	devs, err := Devices(context.Background(), py)
	if err != nil {
		t.Fatal(err)
	}
	_, gpuDriver := os.Stat("/dev/nvidia0")
	if gpuDriver != nil && len(devs) > 0 {
		t.Fatalf("no NVIDIA device node, but %d GPUs listed: %+v", len(devs), devs)
	}
	for _, d := range devs {
		if d.ID == "" || d.Name == "" {
			t.Errorf("device %+v lacks an ID or a name", d)
		}
	}
	t.Logf("GPUs: %+v", devs)
}

// TestGenPoolSince: the counters are the difference of two readings; the
// pool's size and its peaks are the later reading's.
func TestGenPoolSince(t *testing.T) {
	before := GenPool{Blocks: 100, BlockTokens: 16, PeakBlocks: 10, Calls: 1, Requests: 64, Prefills: 8, SharedRows: 56, Steps: 4, RowSteps: 256, UsedTokenSteps: 9000, BlockReuses: 2, Preemptions: 1}
	after := GenPool{Blocks: 100, BlockTokens: 16, PeakBlocks: 30, Calls: 2, Requests: 128, Prefills: 16, SharedRows: 112, Steps: 104, RowSteps: 4256, UsedTokenSteps: 89000, BlockReuses: 5, Preemptions: 4}
	got := after.Since(before)
	want := GenPool{Blocks: 100, BlockTokens: 16, PeakBlocks: 30, Calls: 1, Requests: 64, Prefills: 8, SharedRows: 56, Steps: 100, RowSteps: 4000, UsedTokenSteps: 80000, BlockReuses: 3, Preemptions: 3}
	if got != want {
		t.Fatalf("Since = %+v, want %+v", got, want)
	}
	if got.MeanBatch() != 40 {
		t.Fatalf("mean batch %v, want 40", got.MeanBatch())
	}
}
