package pin

import "strings"

// Slurm identifies the Slurm job that ran a run: recorded in the manifest's
// provenance when the process runs inside a Slurm job (SLURM_JOB_ID is
// set), absent otherwise. It never reaches the run logs or the config hash.
type Slurm struct {
	JobID        string `json:"job_id"`                  // SLURM_JOB_ID
	ArrayJobID   string `json:"array_job_id,omitempty"`  // SLURM_ARRAY_JOB_ID
	ArrayTaskID  string `json:"array_task_id,omitempty"` // SLURM_ARRAY_TASK_ID (the array index)
	Node         string `json:"node,omitempty"`          // SLURMD_NODENAME
	Cluster      string `json:"cluster,omitempty"`       // SLURM_CLUSTER_NAME
	RestartCount string `json:"restart_count,omitempty"` // SLURM_RESTART_COUNT (requeues so far)
	Partition    string `json:"partition,omitempty"`     // SLURM_JOB_PARTITION
}

// SlurmFromEnv reads the Slurm job of this process from the environment
// through getenv (os.Getenv in Resolve); nil when SLURM_JOB_ID is unset.
func SlurmFromEnv(getenv func(string) string) *Slurm {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	id := get("SLURM_JOB_ID")
	if id == "" {
		return nil
	}
	return &Slurm{
		JobID: id, ArrayJobID: get("SLURM_ARRAY_JOB_ID"), ArrayTaskID: get("SLURM_ARRAY_TASK_ID"),
		Node: get("SLURMD_NODENAME"), Cluster: get("SLURM_CLUSTER_NAME"),
		RestartCount: get("SLURM_RESTART_COUNT"), Partition: get("SLURM_JOB_PARTITION"),
	}
}
