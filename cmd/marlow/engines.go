package main

import (
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
)

// newEngines is the registry of the engines this program is built with:
// native. `marlow run` refuses a spec naming any other before it writes
// anything.
func newEngines() (*engine.Registry, error) {
	reg := &engine.Registry{}
	if err := reg.Register(native.Driver()); err != nil {
		return nil, err
	}
	return reg, nil
}
