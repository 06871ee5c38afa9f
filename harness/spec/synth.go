package spec

import (
	"strings"

	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/datasets/synthmath"
)

// Config returns the synth-math generator configuration of these knobs,
// seeded by a task's split seed and holding its validation size. It is the
// one mapping from the spec to the generator, shared by runs and by
// pretraining.
func (s SynthMath) Config(seed uint64, valSize int) synthmath.Config {
	return synthmath.Config{
		Seed: seed, ValSize: valSize,
		OperandsMin: s.OperandsMin, OperandsMax: s.OperandsMax, ValueMax: s.ValueMax,
		Ops: strings.Join(s.Operators, ""),
	}
}

// Config returns the synth-code generator configuration of these knobs (see
// SynthMath.Config).
func (s SynthCode) Config(seed uint64, valSize int) synthcode.Config {
	return synthcode.Config{
		Seed: seed, ValSize: valSize,
		StagesMin: s.StagesMin, StagesMax: s.StagesMax, ReduceProb: s.ReduceProb, ValueMax: s.ValueMax,
		ListMin: s.ListMin, ListMax: s.ListMax, Examples: s.ShownExamples, Hidden: s.HiddenTests,
	}
}
