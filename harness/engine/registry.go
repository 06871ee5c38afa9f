package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Options are the settings of one opened engine. Threads is understood by
// every implementation and never changes results; the others are settings
// of engines that run in another process (torch), which the native engine
// ignores.
type Options struct {
	// Threads is the number of worker threads (1 when 0).
	Threads int
	// Python is the interpreter of a Python engine server ("" = python3).
	Python string
	// Device is "cuda", "cpu" or "auto" ("" = auto).
	Device string
	// DType is "float32", "bfloat16", "float16" or "auto" ("" = auto).
	DType string
	// GenTokens and TrainTokens bound the tokens of one generation wave and
	// of one training micro-batch (0 = the engine's default).
	GenTokens, TrainTokens int
	// GenBackend is a Python engine's generation backend ("" = its default)
	// and KVCacheFraction the share of free GPU memory its KV pool takes
	// (0 = its default).
	GenBackend      string
	KVCacheFraction float64
	// Devices pins the engine to these accelerators (a server process sees
	// only them, through CUDA_VISIBLE_DEVICES); nil leaves it every device
	// its process sees. The runner sets it for runs on GPUs.
	Devices []Device
}

// Device is one accelerator an engine can be pinned to.
type Device struct {
	// ID names the device to a child process: its entry for
	// CUDA_VISIBLE_DEVICES (an index, or the UUID or index the parent's own
	// CUDA_VISIBLE_DEVICES gave it).
	ID string
	// Name is what the driver calls it, e.g. "NVIDIA H200".
	Name string
}

// Versioned is an engine that knows its own version only once it is open
// (a server reports its packages); Open returns that version instead of
// the driver's.
type Versioned interface {
	Version() string
}

// Driver is one engine implementation, registered under its name. An
// implementation package exports its Driver; the program that wants it
// (the CLI) registers it, so this package depends on no implementation.
type Driver struct {
	// Name is the name a spec's model.engine selects, e.g. "native".
	Name string
	// Version names the implementation and its version for run manifests,
	// e.g. "native/go1.26.0".
	Version string
	// Check lists every prerequisite of the engine, opened with opt, that
	// this machine lacks (an interpreter, a package, a device), one error
	// each, and nil when the engine can be opened. It must be cheap and must
	// not start the engine. Nil means nothing to check.
	Check func(ctx context.Context, opt Options) []error
	// Open starts the engine over a base checkpoint folder in the Hugging
	// Face layout (config.json, model.safetensors, tokenizer.json).
	Open func(ctx context.Context, checkpointDir string, opt Options) (Engine, error)
	// Devices lists the GPUs an engine opened with opt would run on (its
	// device is cuda, or auto on a machine with GPUs), in the order
	// CUDA_VISIBLE_DEVICES numbers them; none when it runs on the CPU. It is
	// the runner's preflight of where runs go: one run per GPU by default.
	// Nil means the engine never uses a GPU.
	Devices func(ctx context.Context, opt Options) ([]Device, error)
}

// ErrUnavailable is returned (wrapped) when an engine a plan names is not
// registered or lacks a prerequisite.
var ErrUnavailable = errors.New("engine unavailable")

// ErrOutOfMemory is returned (wrapped) when an engine call ran out of device
// (or host) memory. The error's text names the operation, its batch and the
// budget to lower (models.<scale>.gen_tokens, train_tokens or
// kv_cache_fraction); those budgets are not part of a run's config hash, so
// a run lowered that way resumes from its last checkpoint.
var ErrOutOfMemory = errors.New("engine out of memory")

// Registry maps engine names to drivers. The zero value is empty and ready
// to use, and a nil *Registry is an empty registry for reading (Names,
// Driver, Open, Check), so an option left nil refuses every engine by
// name; it is safe for concurrent use. The program builds its own registry
// and passes it down (there is no global one).
type Registry struct {
	mu      sync.RWMutex
	drivers map[string]Driver
}

// Register adds d. A driver without a name or an Open function, a name
// registered twice, or a nil registry is an error.
func (r *Registry) Register(d Driver) error {
	if r == nil {
		return fmt.Errorf("engine: register %q: nil registry", d.Name)
	}
	if d.Name == "" {
		return errors.New("engine: register: driver has no name")
	}
	if d.Open == nil {
		return fmt.Errorf("engine: register %q: driver has no Open function", d.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.drivers[d.Name]; ok {
		return fmt.Errorf("engine: register %q: already registered", d.Name)
	}
	if r.drivers == nil {
		r.drivers = map[string]Driver{}
	}
	r.drivers[d.Name] = d
	return nil
}

// Names returns the registered engine names, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.drivers))
	for n := range r.drivers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Driver returns the driver registered as name.
func (r *Registry) Driver(name string) (Driver, error) {
	var d Driver
	ok := false
	if r != nil {
		r.mu.RLock()
		d, ok = r.drivers[name]
		r.mu.RUnlock()
	}
	if !ok {
		return Driver{}, fmt.Errorf("engine %q is not registered in this program (have %s): %w", name, r.have(), ErrUnavailable)
	}
	return d, nil
}

func (r *Registry) have() string {
	names := r.Names()
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Open opens the engine registered as name over the base checkpoint in
// checkpointDir, and returns it with its version (the engine's own when it
// is Versioned, else the driver's).
func (r *Registry) Open(ctx context.Context, name, checkpointDir string, opt Options) (Engine, string, error) {
	d, err := r.Driver(name)
	if err != nil {
		return nil, "", err
	}
	if opt.Threads <= 0 {
		opt.Threads = 1
	}
	e, err := d.Open(ctx, checkpointDir, opt)
	if err != nil {
		return nil, "", fmt.Errorf("open engine %s: %w", name, err)
	}
	if v, ok := e.(Versioned); ok {
		return e, v.Version(), nil
	}
	return e, d.Version, nil
}

// Check verifies that every named engine is registered and has all its
// prerequisites when opened with opt. The error (wrapping ErrUnavailable)
// lists every problem of every engine, one per line, so that one attempt
// shows all that is missing.
func (r *Registry) Check(ctx context.Context, opt Options, names ...string) error {
	var probs []string
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		d, err := r.Driver(name)
		if err != nil {
			probs = append(probs, fmt.Sprintf("engine %q is not registered in this program (have %s)", name, r.have()))
			continue
		}
		if d.Check == nil {
			continue
		}
		for _, e := range d.Check(ctx, opt) {
			probs = append(probs, fmt.Sprintf("engine %s: %v", name, e))
		}
	}
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n  %s", ErrUnavailable, strings.Join(probs, "\n  "))
}
