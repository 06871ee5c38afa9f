package pin

import "testing"

func TestSlurmFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got := SlurmFromEnv(env(nil)); got != nil {
		t.Errorf("outside Slurm: %+v, want nil", got)
	}
	got := SlurmFromEnv(env(map[string]string{
		"SLURM_JOB_ID": "1043", "SLURM_ARRAY_JOB_ID": "1040", "SLURM_ARRAY_TASK_ID": "3",
		"SLURMD_NODENAME": "gpu07", "SLURM_CLUSTER_NAME": "c1", "SLURM_RESTART_COUNT": "2", "SLURM_JOB_PARTITION": "gpu",
	}))
	want := Slurm{JobID: "1043", ArrayJobID: "1040", ArrayTaskID: "3", Node: "gpu07", Cluster: "c1", RestartCount: "2", Partition: "gpu"}
	if got == nil || *got != want {
		t.Errorf("SlurmFromEnv = %+v, want %+v", got, want)
	}
	// A plain (non-array) job records its id only.
	got = SlurmFromEnv(env(map[string]string{"SLURM_JOB_ID": "7"}))
	if got == nil || *got != (Slurm{JobID: "7"}) {
		t.Errorf("plain job: %+v", got)
	}
}
