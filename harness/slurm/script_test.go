package slurm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestArray(t *testing.T) {
	cases := []struct {
		n, max int
		want   string
	}{
		{1, 0, "0"},
		{2, 0, "0-1"},
		{22, 0, "0-21"},
		{22, 4, "0-21%4"},
		{3, 3, "0-2"},
		{3, 5, "0-2"},
		{1, 1, "0"},
	}
	for _, c := range cases {
		if got := Array(c.n, c.max); got != c.want {
			t.Errorf("Array(%d, %d) = %q, want %q", c.n, c.max, got, c.want)
		}
	}
}

func baseScript() Script {
	return Script{
		Experiment: "smoke", Submission: "submit-001", Runs: []string{"sa-rl-s-synth-math-seed1", "voting-ip-s-synth-math-seed1", "it's-quoted"},
		Marlow: "/opt/marlow bin/marlow", Spec: "/repo/seeds/smoke.yaml", RunsRoot: "/shared/runs", WorkDir: "/repo",
		Output: "/shared/runs/smoke/slurm/submit-001/%a.log", CPUsPerTask: 1, WarnSeconds: 120,
	}
}

func TestScriptText(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(*Script)
		want   []string
		absent []string
	}{
		{name: "defaults", edit: func(*Script) {},
			want: []string{"#!/bin/bash\n", "#SBATCH --job-name=marlow-smoke\n", "#SBATCH --array=0-2\n", "#SBATCH --requeue\n",
				"#SBATCH --open-mode=append\n", "#SBATCH --output=/shared/runs/smoke/slurm/submit-001/%a.log\n",
				"#SBATCH --signal=B:USR1@120\n", "#SBATCH --chdir=/repo\n", "#SBATCH --cpus-per-task=1\n",
				"0) run='sa-rl-s-synth-math-seed1' ;;\n", "1) run='voting-ip-s-synth-math-seed1' ;;\n", `2) run='it'\''s-quoted' ;;` + "\n",
				`'/opt/marlow bin/marlow' run '/repo/seeds/smoke.yaml' --runs '/shared/runs' --only "$run" --jobs 1 --threads "${SLURM_CPUS_PER_TASK:-1}" --progress lines &`,
				"trap warn USR1\n"},
			absent: []string{"--partition", "--account", "--qos", "--time", "--gres", "--mem", "--allow-dirty", "--unsafe-code-exec"}},
		{name: "every option", edit: func(s *Script) {
			s.Partition, s.Account, s.QOS, s.Time, s.Gres, s.Mem = "gpu", "lab", "high", "1-00:00:00", "gpu:1", "16G"
			s.CPUsPerTask, s.MaxParallel = 8, 2
			s.SbatchArgs = []string{"--constraint=a100", "--exclusive"}
			s.AllowDirty, s.UnsafeCodeExec = true, true
		}, want: []string{"#SBATCH --array=0-2%2\n", "#SBATCH --partition=gpu\n", "#SBATCH --account=lab\n", "#SBATCH --qos=high\n",
			"#SBATCH --time=1-00:00:00\n", "#SBATCH --gres=gpu:1\n", "#SBATCH --cpus-per-task=8\n", "#SBATCH --mem=16G\n",
			"#SBATCH --constraint=a100\n#SBATCH --exclusive\n", "--progress lines --allow-dirty --unsafe-code-exec &"}},
		{name: "no warning signal", edit: func(s *Script) { s.WarnSeconds = 0 }, absent: []string{"--signal"}},
		{name: "one run", edit: func(s *Script) { s.Runs = s.Runs[:1] }, want: []string{"#SBATCH --array=0\n"}, absent: []string{"1) run="}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := baseScript()
			c.edit(&s)
			text := s.Text()
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Errorf("script lacks %q:\n%s", w, text)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(text, a) {
					t.Errorf("script holds %q:\n%s", a, text)
				}
			}
			// Every directive precedes the first command: sbatch stops
			// reading #SBATCH lines at the first command.
			body := text[strings.Index(text, "set -u"):]
			if strings.Contains(body, "#SBATCH") {
				t.Errorf("an #SBATCH line follows a command:\n%s", text)
			}
			bashSyntax(t, text)
		})
	}
}

func TestReportScriptText(t *testing.T) {
	r := ReportScript{Experiment: "smoke", Marlow: "/bin/marlow", Spec: "/repo/seeds/smoke.yaml", RunsRoot: "/shared/runs", Out: "/repo/reports/smoke",
		WorkDir: "/repo", Output: "/shared/runs/smoke/slurm/submit-001-report.log", Partition: "cpu", Mem: "4G", SbatchArgs: []string{"--exclusive"}}
	text := r.Text()
	for _, w := range []string{"#SBATCH --job-name=marlow-smoke-report\n", "#SBATCH --output=/shared/runs/smoke/slurm/submit-001-report.log\n",
		"#SBATCH --partition=cpu\n", "#SBATCH --mem=4G\n", "#SBATCH --cpus-per-task=1\n", "#SBATCH --exclusive\n",
		"exec '/bin/marlow' report '/repo/seeds/smoke.yaml' --runs '/shared/runs' --partial --out '/repo/reports/smoke'\n"} {
		if !strings.Contains(text, w) {
			t.Errorf("report script lacks %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, "--array") || strings.Contains(text, "--gres") {
		t.Errorf("report script asks for an array or generic resources:\n%s", text)
	}
	bashSyntax(t, text)
}

func bashSyntax(t *testing.T, text string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.sh")
	if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", p).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v\n%s", err, out)
	}
}

func TestMapRoundTrip(t *testing.T) {
	runs := []string{"a-seed1", "b-seed1", "c-seed2"}
	text := MapText(runs)
	if text != "0\ta-seed1\n1\tb-seed1\n2\tc-seed2\n" {
		t.Errorf("MapText = %q", text)
	}
	got, err := ParseMap(text)
	if err != nil || strings.Join(got, ",") != strings.Join(runs, ",") {
		t.Errorf("ParseMap = %v, %v; want %v", got, err, runs)
	}
	if got, err := ParseMap(""); err != nil || len(got) != 0 {
		t.Errorf("ParseMap(empty) = %v, %v", got, err)
	}
	for _, bad := range []string{"1\ta\n", "0\ta\n0\tb\n", "0 a\n", "0\t\n", "x\ta\n"} {
		if _, err := ParseMap(bad); err == nil {
			t.Errorf("ParseMap(%q) accepted a malformed map", bad)
		}
	}
}

// fakeMarlow writes a stand-in for the marlow binary that records its
// arguments and signals in dir, and exits with 130 on TERM as marlow run
// does after committing.
func fakeMarlow(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "marlow")
	body := `#!/bin/bash
printf '%s\n' "$@" > "` + dir + `/args"
trap 'echo TERM >> "` + dir + `/signals"; exit 130' TERM
echo started > "` + dir + `/started"
for i in $(seq 200); do [ -e "` + dir + `/stop" ] && exit 0; sleep 0.05; done
exit 0
`
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// startTask runs the array script as array task index; with quick, the
// fake marlow exits at once.
func startTask(t *testing.T, s Script, index string, quick bool) (*exec.Cmd, string) {
	t.Helper()
	dir := t.TempDir()
	s.Marlow = fakeMarlow(t, dir)
	if quick {
		if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "task.sh")
	if err := os.WriteFile(p, []byte(s.Text()), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", p)
	cmd.Env = append(os.Environ(), "SLURM_ARRAY_TASK_ID="+index, "SLURM_CPUS_PER_TASK=3", "SLURM_JOB_ID=77", "SLURM_ARRAY_JOB_ID=70")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, dir
}

func waitFile(t *testing.T, p string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(p); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func TestScriptRunsItsRun(t *testing.T) {
	cmd, dir := startTask(t, baseScript(), "1", true)
	if code := exitCode(t, cmd.Wait()); code != 0 {
		t.Fatalf("task exited %d", code)
	}
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	want := "run\n/repo/seeds/smoke.yaml\n--runs\n/shared/runs\n--only\nvoting-ip-s-synth-math-seed1\n--jobs\n1\n--threads\n3\n--progress\nlines\n"
	if string(args) != want {
		t.Errorf("marlow got\n%s\nwant\n%s", args, want)
	}

	cmd, _ = startTask(t, baseScript(), "3", true)
	if code := exitCode(t, cmd.Wait()); code != 2 {
		t.Errorf("an index outside the map exited %d, want 2", code)
	}
}

func TestScriptTurnsWarningIntoTerm(t *testing.T) {
	cmd, dir := startTask(t, baseScript(), "0", false)
	waitFile(t, filepath.Join(dir, "started"))
	// Slurm's TERM to the batch shell alone is not forwarded (marlow gets
	// its own from Slurm; a second one would kill it).
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "signals")); err == nil {
		t.Fatal("the script forwarded Slurm's TERM to marlow")
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd.Wait()); code != 130 {
		t.Errorf("task exited %d after the warning, want marlow's 130", code)
	}
	sig, err := os.ReadFile(filepath.Join(dir, "signals"))
	if err != nil || string(sig) != "TERM\n" {
		t.Errorf("marlow received %q (%v), want one TERM", sig, err)
	}
}
