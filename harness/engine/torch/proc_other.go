//go:build !unix

package torch

import "os/exec"

func ownGroup(c *exec.Cmd) {}

func killGroup(c *exec.Cmd) {
	if c.Process != nil {
		_ = c.Process.Kill()
	}
}
