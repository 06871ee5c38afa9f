package study

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
)

// A routing says which adapter (policy) each role's turns use and how each
// adapter is trained. The conditions sp and ip are the two named routings
// every spec has: sp routes every role to one adapter (SharedAdapter), ip
// each role type to an adapter of its own, named by the role. A spec may
// declare others (its routings section): each starts from sp or ip (From,
// which is also the condition the analysis judges its runs as) and changes
// where some roles go (Roles: another adapter, shared by the roles that
// name it, or FrozenBase: the frozen base model, not trained) and how some
// adapters are trained (Adapters: a learning-rate multiplier, a KL
// coefficient to the base model).

// SharedAdapter is the one adapter of the sp routing.
const SharedAdapter = "shared"

// FrozenBase is the word of a routing's roles section for a role routed to
// the frozen base model: its turns sample from the base policy, no adapter
// exists for it and it is never trained.
const FrozenBase = "base"

// Routing is a routing of roles to adapters beyond the built-in sp and ip.
// A nil *Routing is the condition's own (built-in) routing, so the configs
// of sp and ip runs, and their hashes, do not mention routings.
type Routing struct {
	// Name is the routing's name in the spec (its key in routings), which
	// the run IDs carry in place of the condition.
	Name string `yaml:"-" json:"name"`
	// From is the built-in routing it starts from, SP or IP: roles it does
	// not list go where From sends them.
	From string `yaml:"from" json:"from"`
	// Roles maps a role type to the adapter its turns use, or to
	// FrozenBase.
	Roles map[string]string `yaml:"roles,omitempty" json:"roles,omitempty"`
	// Adapters are the training settings of adapters the routing uses.
	Adapters map[string]AdapterSettings `yaml:"adapters,omitempty" json:"adapters,omitempty"`
}

// AdapterSettings are one adapter's training settings in a routing; an
// unset field keeps the run's own.
type AdapterSettings struct {
	// LRMult multiplies the run's learning rate (after the schedule) for
	// this adapter's optimizer steps; nil is 1.
	LRMult *float64 `yaml:"lr_mult,omitempty" json:"lr_mult,omitempty"`
	// KLCoef is the KL-to-base coefficient of every role routed to this
	// adapter, in place of grpo.kl_coef's; nil keeps grpo.kl_coef's.
	KLCoef *float64 `yaml:"kl_coef,omitempty" json:"kl_coef,omitempty"`
}

// routingNameRe is the form of a routing's and of an adapter's name: a
// routing's name becomes part of run IDs, an adapter's a checkpoint
// folder, so neither has dashes or capitals.
var routingNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Route returns the adapter a role's turns use under the routing: ""
// for a role routed to the frozen base model.
func (r *Routing) Route(role string) string {
	if a, ok := r.Roles[role]; ok {
		if a == FrozenBase {
			return ""
		}
		return a
	}
	if r.From == SP {
		return SharedAdapter
	}
	return role
}

// Settings returns the training settings of an adapter (empty ones for an
// adapter the routing sets nothing for, and for a nil routing).
func (r *Routing) Settings(adapter string) AdapterSettings {
	if r == nil {
		return AdapterSettings{}
	}
	return r.Adapters[adapter]
}

// LRMultOf is the adapter's learning-rate multiplier, 1 when unset.
func (s AdapterSettings) LRMultOf() float64 {
	if s.LRMult == nil {
		return 1
	}
	return *s.LRMult
}

// Validate checks a declared routing named name, each problem reported by
// add with the key path under the routing (from, roles.<role>,
// adapters.<adapter>.lr_mult ...).
func (r Routing) Validate(name string, add func(key, format string, a ...any)) {
	if !routingNameRe.MatchString(name) {
		add("", "routing name %q must match %s (it becomes part of run IDs)", name, routingNameRe)
	}
	if _, builtin := ConditionOf(name); builtin {
		add("", "routing name %q is a condition's; the built-in routings sp and ip cannot be redeclared (name a new routing and set from: sp or from: ip)", name)
	}
	if r.From != SP && r.From != IP {
		add("from", "from %q: want %s or %s (the built-in routing it starts from, and the condition its runs are judged as)", r.From, SP, IP)
	}
	routed := map[string]bool{}
	for _, role := range Roles {
		routed[r.Route(role)] = true
	}
	for _, role := range slices.Sorted(maps.Keys(r.Roles)) {
		a := r.Roles[role]
		if !slices.Contains(Roles, role) {
			add("roles."+role, "unknown role %q (want one of %v)", role, Roles)
		}
		if a != FrozenBase && !routingNameRe.MatchString(a) {
			add("roles."+role, "adapter name %q must match %s, or be %q for the frozen base model", a, routingNameRe, FrozenBase)
		}
	}
	for _, a := range slices.Sorted(maps.Keys(r.Adapters)) {
		s := r.Adapters[a]
		if a == FrozenBase || !routed[a] {
			add("adapters."+a, "adapter %q is not one the routing trains (its adapters: %v)", a, r.AdapterNames())
		}
		if s.LRMult != nil && !(*s.LRMult > 0 && !math.IsInf(*s.LRMult, 0)) {
			add("adapters."+a+".lr_mult", "lr_mult %v must be a finite number > 0 (route a role to %q to freeze it)", *s.LRMult, FrozenBase)
		}
		if s.KLCoef != nil && !(*s.KLCoef >= 0 && !math.IsInf(*s.KLCoef, 0)) {
			add("adapters."+a+".kl_coef", "kl_coef %v must be a finite number >= 0", *s.KLCoef)
		}
	}
}

// AdapterNames lists the adapters the routing sends some role type to,
// sorted.
func (r Routing) AdapterNames() []string {
	var out []string
	for _, role := range Roles {
		if a := r.Route(role); a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// Describe is the routing in one line for plans, manifests and reports:
// "from ip; aggregator -> base (frozen); generator: lr x0.5".
func (r *Routing) Describe() string {
	if r == nil {
		return ""
	}
	s := "from " + r.From
	for _, role := range slices.Sorted(maps.Keys(r.Roles)) {
		a := r.Roles[role]
		if a == FrozenBase {
			a += " (frozen)"
		}
		s += fmt.Sprintf("; %s -> %s", role, a)
	}
	for _, a := range slices.Sorted(maps.Keys(r.Adapters)) {
		st := r.Adapters[a]
		if st.LRMult != nil {
			s += fmt.Sprintf("; %s: lr x%g", a, *st.LRMult)
		}
		if st.KLCoef != nil {
			s += fmt.Sprintf("; %s: kl_coef %g", a, *st.KLCoef)
		}
	}
	return s
}
