package deepcoder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/sandbox"
)

// testRoot holds the sandbox working dirs of this package's tests.
var testRoot string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deepcoder-test-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	verOnce sync.Once
	verInst *Verifier
	verErr  error
)

// testVerifier is shared by the tests: short timeouts, two workers.
func testVerifier(t *testing.T) *Verifier {
	t.Helper()
	if !sandbox.Probe().Network {
		t.Skipf("no network isolation on this machine: %s", sandbox.Probe().Detail)
	}
	if _, err := findPython(); err != nil {
		t.Skip(err)
	}
	verOnce.Do(func() {
		verInst, verErr = NewVerifier(VerifierConfig{
			TestTimeout:  1500 * time.Millisecond,
			TotalTimeout: 20 * time.Second,
			Workers:      2,
			TempRoot:     testRoot,
			Limits:       sandbox.Limits{CPUSeconds: 1, AddressSpace: 512 << 20, Processes: 32, OutputBytes: 256 << 10},
		})
	})
	if verErr != nil {
		t.Fatal(verErr)
	}
	return verInst
}

func fence(code string) string {
	return "Here is my solution.\n\n```python\n" + code + "```\n"
}

// handProblems are DeepCoder-style problems in each published tests shape,
// with a reference solution and a near miss.
var handProblems = []struct {
	name     string
	tests    string // tests column, in the subset's shape
	metadata string
	ref      string
	miss     string
}{
	{
		name:  "lcbv5 stdin sum",
		tests: `[{"input": "3 4\n", "output": "7\n", "testtype": "stdin"}, {"input": "-5 5\n", "output": "0\n", "testtype": "stdin"}]`,
		ref:   "a, b = map(int, input().split())\nprint(a + b)\n",
		miss:  "a, b = map(int, input().split())\nprint(a - b)\n",
	},
	{
		name:     "lcbv5 functional max gap",
		tests:    `[{"input": "[1, 5, 2]", "output": "4", "testtype": "functional"}, {"input": "[7]", "output": "0", "testtype": "functional"}]`,
		metadata: `{"func_name": "maxGap"}`,
		ref:      "from typing import List\nclass Solution:\n    def maxGap(self, nums: List[int]) -> int:\n        return max(nums) - min(nums)\n",
		miss:     "from typing import List\nclass Solution:\n    def maxGap(self, nums: List[int]) -> int:\n        return max(nums) - min(nums) + (1 if len(nums) > 1 else 0)\n",
	},
	{
		name:     "lcbv5 functional two args string",
		tests:    `[{"input": "\"abc\"\n2", "output": "\"abcabc\"", "testtype": "functional"}, {"input": "\"x\"\n0", "output": "\"\"", "testtype": "functional"}]`,
		metadata: `{"func_name": "repeat"}`,
		ref:      "class Solution:\n    def repeat(self, s: str, k: int) -> str:\n        return s * k\n",
		miss:     "class Solution:\n    def repeat(self, s: str, k: int) -> str:\n        return s * max(k, 1)\n",
	},
	{
		name:  "primeintellect fibonacci",
		tests: `[{"type": "stdin_stdout", "input": "1\n", "output": "1\n"}, {"type": "stdin_stdout", "input": "10\n", "output": "55\n"}, {"type": "stdin_stdout", "input": "90\n", "output": "2880067194370816120\n"}]`,
		ref:   "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)\n",
		miss:  "n = int(input())\na, b = 1, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)\n",
	},
	{
		name:  "primeintellect float mean",
		tests: `[{"type": "stdin_stdout", "input": "3\n1 2 4\n", "output": "2.333333\n"}, {"type": "stdin_stdout", "input": "2\n1 2\n", "output": "1.5\n"}]`,
		ref:   "n = int(input())\nxs = list(map(int, input().split()))\nprint('%.10f' % (sum(xs) / n))\n",
		miss:  "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) // n)\n",
	},
	{
		name:  "taco stdin vowels",
		tests: `{"inputs": ["hello\n", "sky\n", "AEIOU\n"], "outputs": ["2\n", "0\n", "5\n"]}`,
		ref:   "s = input().strip().lower()\nprint(sum(c in 'aeiou' for c in s))\n",
		miss:  "s = input().strip().lower()\nprint(sum(c in 'aeiouy' for c in s))\n",
	},
	{
		name:  "taco stdin output as lines",
		tests: `{"inputs": ["3\n"], "outputs": [["1", "2", "3"]]}`,
		ref:   "n = int(input())\nfor i in range(1, n + 1):\n    print(i)\n",
		miss:  "n = int(input())\nfor i in range(1, n):\n    print(i)\n",
	},
	{
		name:  "taco functional add binary",
		tests: `{"inputs": [[1, 1], [0, 1], [5, 9]], "outputs": [["10"], ["1"], ["1110"]], "fn_name": "add_binary"}`,
		ref:   "def add_binary(a, b):\n    return bin(a + b)[2:]\n",
		miss:  "def add_binary(a, b):\n    return bin(a + b)\n",
	},
	{
		name:  "taco functional list result",
		tests: `{"inputs": [[[3, 1, 2]], [[]]], "outputs": [[3, 2, 1], []], "fn_name": "sort_desc"}`,
		ref:   "def sort_desc(xs):\n    return sorted(xs, reverse=True)\n",
		miss:  "def sort_desc(xs):\n    return sorted(xs)\n",
	},
	{
		name:  "codeforces yes no",
		tests: `[{"input": "3\n4\n7\n10\n", "output": "YES\nNO\nYES\n"}]`,
		ref:   "t = int(input())\nfor _ in range(t):\n    print('YES' if int(input()) % 2 == 0 else 'NO')\n",
		miss:  "t = int(input())\nfor _ in range(t):\n    print('YES' if int(input()) % 2 == 0 else 'NO')\n    break\n",
	},
	{
		name:  "codeforces big integers",
		tests: `[{"input": "2 64\n", "output": "18446744073709551616\n"}, {"input": "10 3\n", "output": "1000\n"}]`,
		ref:   "a, b = map(int, input().split())\nprint(a ** b)\n",
		miss:  "a, b = map(int, input().split())\nprint(a ** b % (10**9 + 7))\n",
	},
	{
		name:  "codeforces grid whitespace",
		tests: `[{"input": "2 3\n", "output": "...\n...\n"}]`,
		ref:   "n, m = map(int, input().split())\nfor _ in range(n):\n    print('.' * m + '   ')\n",
		miss:  "n, m = map(int, input().split())\nfor _ in range(n):\n    print('.' * (m - 1))\n",
	},
}

func TestHandWrittenProblems(t *testing.T) {
	v := testVerifier(t)
	shapes := map[string]bool{}
	for _, hp := range handProblems {
		t.Run(hp.name, func(t *testing.T) {
			p, reason := buildProblem("hand/"+hp.name, "statement", hp.tests, "", hp.metadata)
			if reason != "" {
				t.Fatalf("skipped: %s", reason)
			}
			if got := v.Check(context.Background(), p, fence(hp.ref)); !got.Correct {
				t.Errorf("reference rejected: %s", got.Reason)
			}
			if got := v.Check(context.Background(), p, fence(hp.miss)); got.Correct {
				t.Errorf("near miss accepted")
			}
		})
		shapes[hp.name[:5]] = true
	}
	if len(handProblems) < 10 || len(shapes) != 4 {
		t.Fatalf("%d problems over shapes %v", len(handProblems), shapes)
	}
}

// TestHostileSolutions submits attacks as solutions: each must be reported
// as a failed test, and the harness must carry on.
func TestHostileSolutions(t *testing.T) {
	v := testVerifier(t)
	t.Setenv("MARLOW_TEST_SECRET", "hunter2")
	p, reason := buildProblem("hostile", "print 42", `[{"input": "", "output": "42\n"}]`, "", "")
	if reason != "" {
		t.Fatal(reason)
	}
	canary := filepath.Join(testRoot, "canary")
	if err := os.WriteFile(canary, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, code string }{
		{"infinite loop", "while True:\n    pass\n"},
		{"fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"},
		{"8 GB allocation", "x = bytearray(8 << 30)\nprint(42)\n"},
		{"write outside temp dir", "open('/tmp/marlow-hostile-escape', 'w').write('x')\nprint(42)\n"},
		{"connect to loopback", "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)\nprint(42)\n"},
		{"print 1 GB", "import sys\nb = '4' * 65536\nfor _ in range(16384):\n    sys.stdout.write(b)\n"},
		{"delete parent files", "import os, shutil\nshutil.rmtree('..')\nprint(42)\n"},
		{"read harness env", "import os\nprint(42 if 'MARLOW_TEST_SECRET' in os.environ else 0)\n"},
		{"sleep past timeout", "import time\ntime.sleep(30)\nprint(42)\n"},
		{"background process", "import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True)\nimport time\ntime.sleep(30)\nprint(42)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := v.Check(context.Background(), p, fence(tc.code))
			if got.Correct {
				t.Fatalf("hostile program passed")
			}
			t.Logf("reason: %s", got.Reason)
		})
	}
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("canary in the working dirs' parent: %v", err)
	}
	if _, err := os.Stat("/tmp/marlow-hostile-escape"); err == nil {
		os.Remove("/tmp/marlow-hostile-escape")
		t.Error("a program wrote outside its working directory")
	}
	// The harness still grades a correct program afterwards.
	if got := v.Check(context.Background(), p, fence("print(42)\n")); !got.Correct {
		t.Fatalf("correct program rejected after the hostile suite: %s", got.Reason)
	}
}

func TestVerifyNoCode(t *testing.T) {
	v := testVerifier(t)
	p := datasets.Problem{Tests: []datasets.Test{{Input: "", Output: "1"}}}
	for _, tc := range []struct{ name, out, want string }{
		{"no block", "print(1)", "no fenced code block"},
		{"other language", "```cpp\nint main(){}\n```", `code block language "cpp" is not Python`},
		{"unclosed", "```python\nprint(1)\n", "no fenced code block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := v.Check(context.Background(), p, tc.out)
			if got.Correct || got.Reason != tc.want {
				t.Fatalf("got %+v, want reason %q", got, tc.want)
			}
		})
	}
	if got := v.Check(context.Background(), datasets.Problem{}, fence("print(1)\n")); got.Correct {
		t.Fatal("problem without tests graded correct")
	}
}

func TestVerifyConcurrent(t *testing.T) {
	v := testVerifier(t)
	p, _ := buildProblem("c", "s", `[{"input": "2\n", "output": "4\n"}]`, "", "")
	var wg sync.WaitGroup
	results := make([]bool, 6)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			code := "print(int(input()) * 2)\n"
			if i%2 == 1 {
				code = "print(int(input()) * 3)\n"
			}
			results[i] = v.Check(context.Background(), p, fence(code)).Correct
		}(i)
	}
	wg.Wait()
	for i, ok := range results {
		if ok != (i%2 == 0) {
			t.Fatalf("run %d: correct=%v", i, ok)
		}
	}
}
