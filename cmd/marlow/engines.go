package main

import (
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/engine/torch"
)

// newEngines is the registry of the engines this program is built with:
// native and torch. `marlow run` refuses a spec naming any other before it
// writes anything.
func newEngines() (*engine.Registry, error) {
	reg := &engine.Registry{}
	for _, d := range []engine.Driver{native.Driver(), torch.Driver()} {
		if err := reg.Register(d); err != nil {
			return nil, err
		}
	}
	return reg, nil
}
