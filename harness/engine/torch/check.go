package torch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
)

// Requirement is a Python package the server needs, with the oldest
// version it is known to work with.
type Requirement struct {
	Package string
	Min     string
}

// Requirements are the packages the server imports. Qwen3 arrived in
// transformers 4.51.
var Requirements = []Requirement{
	{"torch", "2.4"}, {"transformers", "4.51"}, {"peft", "0.14"}, {"safetensors", "0.4"},
	{"tokenizers", "0.21"}, {"numpy", "1.24"}, {"jinja2", "3.0"},
}

// Environment is what Check found.
type Environment struct {
	Python   string            // the interpreter's version
	Versions map[string]string // installed version per package; "" when missing
	CUDA     *bool             // torch has a CUDA build and the driver shows a GPU; nil when not asked or torch is missing
	Devices  []string          // PCI addresses of the NVIDIA GPUs when CUDA was asked for
}

const probe = `
import importlib.metadata as m, json, sys
out = {"python": sys.version.split()[0], "versions": {}}
for p in sys.argv[2:]:
    try:
        out["versions"][p] = m.version(p)
    except Exception:
        out["versions"][p] = ""
if sys.argv[1] == "cuda" and out["versions"].get("torch"):
    # Without importing torch (seconds): its CUDA build from torch/version.py,
    # the GPUs from the NVIDIA driver's /proc entries.
    import glob, importlib.util, os
    try:
        spec = importlib.util.find_spec("torch")
        ns = {}
        exec(open(os.path.join(os.path.dirname(spec.origin), "version.py")).read(), ns)
        out["torch_cuda"] = ns.get("cuda") or ""
    except Exception as e:
        out["torch_cuda"] = ""
        out["cuda_error"] = repr(e)
    gpus = sorted(glob.glob("/proc/driver/nvidia/gpus/*"))
    out["devices"] = [os.path.basename(g) for g in gpus]
    out["cuda"] = bool(out["torch_cuda"]) and (len(gpus) > 0 or os.path.exists("/dev/nvidia0"))
print(json.dumps(out))
`

// Check lists what the torch engine would miss with interpreter python
// (default: see DefaultPython) on device ("cuda" also checks that torch sees a GPU):
// the interpreter itself, each required package (with the version found
// when it is too old) and CUDA. An empty list means the engine can start.
//
// The probe imports torch (seconds), and one marlow command checks the
// same interpreter more than once (placing the runs on GPUs, then running
// them), so each (interpreter, device) is probed once per process.
func Check(ctx context.Context, python, device string) (Environment, []string) {
	python = DefaultPython(python)
	path, err := exec.LookPath(python)
	if err != nil {
		return Environment{}, []string{fmt.Sprintf("Python interpreter %q for the torch engine: not found (%v)", python, err)}
	}
	checkCache.Lock()
	defer checkCache.Unlock()
	key := path + "\x00" + device
	if c, ok := checkCache.by[key]; ok {
		return c.env, slices.Clone(c.missing)
	}
	env, missing := probeEnvironment(ctx, path, device)
	if ctx.Err() == nil {
		if checkCache.by == nil {
			checkCache.by = map[string]checked{}
		}
		checkCache.by[key] = checked{env, slices.Clone(missing)}
	}
	return env, missing
}

// checked is one probe's result in checkCache.
type checked struct {
	env     Environment
	missing []string
}

// checkCache keeps Check's result per interpreter path and device for the
// life of the process.
var checkCache struct {
	sync.Mutex
	by map[string]checked
}

// probeEnvironment runs the probe with the interpreter at path (see Check).
func probeEnvironment(ctx context.Context, path, device string) (Environment, []string) {
	var env Environment
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := []string{"-c", probe, device}
	for _, r := range Requirements {
		args = append(args, r.Package)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return env, []string{fmt.Sprintf("Python interpreter %s does not run: %v: %s", path, err, lastLines(stderr.String(), 3))}
	}
	var res struct {
		Python    string            `json:"python"`
		Versions  map[string]string `json:"versions"`
		CUDA      *bool             `json:"cuda"`
		Devices   []string          `json:"devices"`
		CUDAError string            `json:"cuda_error"`
		TorchCUDA string            `json:"torch_cuda"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return env, []string{fmt.Sprintf("Python interpreter %s: cannot read its package versions: %v", path, err)}
	}
	env = Environment{Python: res.Python, Versions: res.Versions, CUDA: res.CUDA, Devices: res.Devices}
	var missing []string
	for _, r := range Requirements {
		v := res.Versions[r.Package]
		switch {
		case v == "":
			missing = append(missing, fmt.Sprintf("Python package %s (>= %s) in %s: not installed", r.Package, r.Min, path))
		case versionLess(v, r.Min):
			missing = append(missing, fmt.Sprintf("Python package %s >= %s in %s: found %s", r.Package, r.Min, path, v))
		}
	}
	if device == "cuda" && res.Versions["torch"] != "" && (res.CUDA == nil || !*res.CUDA) {
		msg := fmt.Sprintf("CUDA (device: cuda): no NVIDIA GPU visible to this machine (torch %s in %s)", res.Versions["torch"], path)
		if res.TorchCUDA == "" {
			msg = fmt.Sprintf("CUDA (device: cuda): torch %s in %s is built without CUDA", res.Versions["torch"], path)
		}
		if res.CUDAError != "" {
			msg += " (" + res.CUDAError + ")"
		}
		missing = append(missing, msg)
	}
	return env, missing
}

// versionLess compares the leading numeric components of two versions.
func versionLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	for i := 0; i < max(len(pa), len(pb)); i++ {
		x, y := 0, 0
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func versionParts(v string) []int {
	var out []int
	for _, f := range strings.Split(v, ".") {
		n := 0
		digits := false
		for _, c := range f {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
			digits = true
		}
		if !digits {
			break
		}
		out = append(out, n)
		if _, err := strconv.Atoi(f); err != nil {
			break
		}
	}
	return out
}

// deviceProbe lists the GPUs torch sees: none, without importing torch,
// when the machine shows no NVIDIA driver; else torch.cuda's count and
// names. It also reports the CUDA_VISIBLE_DEVICES it ran under (null when
// unset), whose entries name the devices to a child process.
const deviceProbe = `
import glob, json, os
out = {"count": 0, "names": [], "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
if glob.glob("/proc/driver/nvidia/gpus/*") or os.path.exists("/dev/nvidia0"):
    import torch
    if torch.cuda.is_available():
        out["count"] = torch.cuda.device_count()
        out["names"] = [torch.cuda.get_device_name(i) for i in range(out["count"])]
print(json.dumps(out))
`

// devicesCache keeps each interpreter's GPU list: the GPUs of a machine do
// not change during one marlow command, and the probe imports torch.
var devicesCache struct {
	sync.Mutex
	by map[string][]engine.Device
}

// Devices lists the GPUs the torch engine sees with interpreter python
// (see DefaultPython), in CUDA's order, each with the ID that pins a
// server to it (see deviceIDs). It is empty on a machine without an
// NVIDIA driver or with a torch built without CUDA.
func Devices(ctx context.Context, python string) ([]engine.Device, error) {
	python = DefaultPython(python)
	devicesCache.Lock()
	defer devicesCache.Unlock()
	if d, ok := devicesCache.by[python]; ok {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", deviceProbe)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("torch engine: list the GPUs with %s: %v: %s", python, err, lastLines(stderr.String(), 3))
	}
	var res struct {
		Count   int      `json:"count"`
		Names   []string `json:"names"`
		Visible *string  `json:"visible"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("torch engine: list the GPUs with %s: %v", python, err)
	}
	ids := deviceIDs(res.Visible, res.Count)
	devs := make([]engine.Device, len(ids))
	for i, id := range ids {
		devs[i] = engine.Device{ID: id}
		if i < len(res.Names) {
			devs[i].Name = res.Names[i]
		}
	}
	if devicesCache.by == nil {
		devicesCache.by = map[string][]engine.Device{}
	}
	devicesCache.by[python] = devs
	return devs, nil
}

// deviceIDs names count visible GPUs for a child's CUDA_VISIBLE_DEVICES:
// the entries of the parent's own list when it has one (a Slurm task's
// allocated GPUs, UUIDs or MIG instances), else their indices.
func deviceIDs(visible *string, count int) []string {
	var entries []string
	if visible != nil {
		for _, e := range strings.Split(*visible, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	}
	ids := make([]string, count)
	for i := range ids {
		if visible != nil && i < len(entries) {
			ids[i] = entries[i]
		} else {
			ids[i] = strconv.Itoa(i)
		}
	}
	return ids
}
