// Package pretrain builds the tiny base models of the CPU study: noisy
// teacher transcripts of every workflow role on the synthetic tasks,
// full-parameter supervised pretraining of a Qwen3-architecture shape on
// them with the native engine, a content-addressed checkpoint cache
// (committed seeds/models/ first, then $MARLOW_CACHE), and a calibration
// report of the base models' workflow accuracy and format compliance.
//
// Transcripts are rendered with the workflow package's own prompt builders
// and output-format functions, so the prompts and formats a base model
// learns are exactly those the workflows use. Everything is a pure function
// of the configuration and the seed: the same Job always yields the same
// transcripts and byte-identical checkpoints.
package pretrain

import (
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"slices"
)

// Config is the pretraining section of an experiment: the teacher's role
// mix and noise rates, and the supervised training budget. It is the
// spec's own settings struct, so its defaults (DefaultConfig) and its
// validation (Validate) are the ones a spec file gets.
type Config = spec.Pretrain

// RoleMix gives the share of transcripts of each teacher role (in
// TeacherRoles order by RoleMix.Weights). Reviser is eval-opt's revision
// turn of the generator.
type RoleMix = spec.PretrainRoles

// Noise are the rates of the teacher's deliberate mistakes: Slip, that a
// worked solution (generator, reviser, worker, synthesizer) carries an
// arithmetic slip or a near-miss program (the task's Perturb);
// WrongVerdict, that an evaluator's verdict is flipped; RandomSelection,
// that an aggregator selects a uniformly random candidate or a synthesizer
// copies a random solution; TooManyStrategies, that an orchestrator
// proposes more strategies than allowed; Malformed, that any transcript's
// completion breaks its role's output format.
type Noise = spec.PretrainNoise

// Teacher roles: the workflow roles plus the reviser (eval-opt's revision
// turn of the generator); the registry (package study) lists them.
const RoleReviser = study.Reviser

// TeacherRoles lists the teacher roles in the fixed order used for
// sampling.
var TeacherRoles = study.TeacherRoles

// KindTeacher is the teacher role whose transcripts show each role kind's
// format: a role a workflow file declares has no teacher of its own, and
// the tiny models learn its kind's layout and output format from this
// teacher's transcripts (its system prompt names the role, the rest of
// the layout is the kind's).
var KindTeacher = map[study.Kind]string{
	study.Answerer:        study.Generator,
	study.Judge:           study.Evaluator,
	study.Selector:        study.Aggregator,
	study.Planner:         study.Orchestrator,
	study.SynthesizerKind: study.Synthesizer,
}

// TeacherOf returns the teacher role a role's turns are pretrained from:
// its own when the teacher renders it, else its kind's (KindTeacher); ""
// for a role of no known kind.
func TeacherOf(role string) string {
	if slices.Contains(TeacherRoles, role) {
		return role
	}
	return KindTeacher[study.RoleOf(role).Kind]
}

// DefaultConfig returns the defaults of the spec's pretrain section, the
// settings the committed checkpoints were built with.
func DefaultConfig() Config { return spec.DefaultPretrain() }

// ConfigOf returns the pretraining configuration of a spec (its pretrain
// section), sharing nothing with it.
func ConfigOf(s *spec.Spec, scale string) Config { return s.PretrainFor(scale) }
