//go:build !linux

package sandbox

import (
	"context"
	"errors"
)

// Probe reports that no isolation is available: the sandbox needs Linux
// namespaces.
func Probe() Isolation {
	return Isolation{Level: "none (UNSAFE: sandbox requires Linux)", Detail: "not Linux"}
}

type mode struct{}

func probe() (Isolation, mode) { return Probe(), mode{} }

func (s *Sandbox) run(ctx context.Context, dir string, spec Spec, lim Limits) (Result, error) {
	return Result{}, errors.New("sandbox: running generated code requires Linux")
}
