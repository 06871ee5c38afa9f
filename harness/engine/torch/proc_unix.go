//go:build unix

package torch

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the server in a process group of its own, so that killing
// the group also ends any worker processes it started.
func ownGroup(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the server's process group.
func killGroup(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	_ = c.Process.Kill()
}
