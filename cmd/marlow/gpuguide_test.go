package main

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/spec"
)

// gpuGuide is the GPU guide, docs/gpu.md, under root.
func gpuGuide(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "gpu.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "# Running the paper study on a GPU node\n") {
		t.Fatal("docs/gpu.md does not start with its title")
	}
	return string(b)
}

// shellExpand expands $V, ${V} and ${V:-default} as sh does, from env.
func shellExpand(s string, env map[string]string) string {
	re := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)
	return re.ReplaceAllStringFunc(s, func(m string) string {
		g := re.FindStringSubmatch(m)
		name := g[1] + g[4]
		if v := env[name]; v != "" {
			return v
		}
		return g[3]
	})
}

// download is one huggingface-cli download of the GPU guide.
type download struct{ repo, include, localDir string }

// readmeDownloads runs the GPU guide's sh block of downloads in the
// small sh dialect it uses (export with defaults, one for loop), returning
// each download with its --local-dir expanded and made absolute against cwd.
func readmeDownloads(t *testing.T, section, cwd string, env map[string]string) []download {
	t.Helper()
	var block string
	for _, b := range strings.Split(section, "```sh\n")[1:] {
		b, _, _ = strings.Cut(b, "```")
		if strings.Contains(b, "huggingface-cli download") {
			block = b
		}
	}
	if block == "" {
		t.Fatal("no sh block with downloads in docs/gpu.md")
	}
	block = strings.ReplaceAll(block, "\\\n", " ")
	env = maps(env)
	var loopVar string
	var loopVals []string
	var out []download
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "export":
			for _, a := range f[1:] {
				k, v, _ := strings.Cut(a, "=")
				env[k] = shellExpand(v, env)
			}
		case f[0] == "for":
			loopVar = f[1]
			loopVals = strings.Fields(strings.TrimSuffix(strings.TrimSpace(strings.SplitN(strings.SplitN(line, " in ", 2)[1], ";", 2)[0]), ";"))
		case f[0] == "done":
			loopVar, loopVals = "", nil
		case f[0] == "huggingface-cli":
			vals := []string{""}
			if loopVar != "" {
				vals = loopVals
			}
			for _, v := range vals {
				e := maps(env)
				if loopVar != "" {
					e[loopVar] = v
				}
				d := download{repo: shellExpand(f[2], e)}
				for i := 3; i+1 < len(f); i++ {
					val := strings.Trim(f[i+1], `"'`)
					switch f[i] {
					case "--include":
						d.include = val
					case "--local-dir":
						d.localDir = absFrom(cwd, shellExpand(val, e))
					}
				}
				out = append(out, d)
			}
		}
	}
	return out
}

func maps(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func absFrom(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(cwd, p)
}

// The GPU guide's file table and download commands name the files
// seeds/paper.yaml reads, with MARLOW_MODELS and MARLOW_DATA unset (the
// guide's defaults, models/ and data/ at the repository root), absolute,
// and relative (to the folder marlow and make run in: the same rule in the
// spec, the shell commands and make reproduce's engine-check).
func TestReadmeGPUFilesMatchPaperSpec(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	section := gpuGuide(t, root)
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		if m := regexp.MustCompile("^\\| `(\\$MARLOW_[A-Z]+/[^`]*)`").FindStringSubmatch(line); m != nil {
			rows = append(rows, m[1])
		}
	}
	if len(rows) != 5 {
		t.Fatalf("file table has %d rows under $MARLOW_MODELS/$MARLOW_DATA, want 5 (three models, two datasets): %q", len(rows), rows)
	}
	abs := t.TempDir()
	cases := []struct {
		name string
		env  map[string]string
	}{
		{"unset", map[string]string{}},
		{"absolute", map[string]string{"MARLOW_MODELS": filepath.Join(abs, "m"), "MARLOW_DATA": filepath.Join(abs, "d")}},
		{"relative", map[string]string{"MARLOW_MODELS": "scratch/models", "MARLOW_DATA": "scratch/data"}},
	}
	t.Chdir(root)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"MARLOW_MODELS", "MARLOW_DATA"} {
				t.Setenv(k, tc.env[k])
			}
			s, err := spec.Load(filepath.Join("seeds", "paper.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			// the table, with the guide's defaults
			tenv := map[string]string{"MARLOW_MODELS": "models", "MARLOW_DATA": "data"}
			for k, v := range tc.env {
				tenv[k] = v
			}
			table := map[string]bool{}
			for _, r := range rows {
				table[absFrom(root, strings.TrimSuffix(shellExpand(r, tenv), "/"))] = false
			}
			downloads := readmeDownloads(t, section, root, tc.env)
			fetched := func(file string) bool {
				return slices.ContainsFunc(downloads, func(d download) bool {
					rel, err := filepath.Rel(d.localDir, file)
					if err != nil || strings.HasPrefix(rel, "..") {
						return false
					}
					if d.include == "" {
						return true
					}
					ok, _ := path.Match(d.include, filepath.ToSlash(rel))
					return ok
				})
			}
			for _, sc := range s.Matrix.Scales {
				ck := s.Models[sc].Checkpoint
				if _, ok := table[ck]; !ok {
					t.Errorf("scale %s: the spec reads %s, which the guide's table does not name (%v)", sc, ck, keys(table))
				}
				table[ck] = true
				if !fetched(filepath.Join(ck, "config.json")) {
					t.Errorf("scale %s: no download of the guide writes %s", sc, ck)
				}
			}
			for _, name := range s.Matrix.Tasks {
				task := s.Tasks[name]
				files := []string{task.Path}
				if len(task.Subsets) > 0 {
					files = nil
					for _, sub := range task.Subsets {
						files = append(files, filepath.Join(task.Path, sub, "train-00000-of-00005.parquet"))
					}
				}
				for _, f := range files {
					matched := false
					for row := range table {
						if ok, _ := filepath.Match(strings.ReplaceAll(row, "{0..4}", "[0-4]"), f); ok {
							table[row], matched = true, true
						}
					}
					if !matched {
						t.Errorf("task %s: the spec reads %s, which the guide's table does not name (%v)", name, f, keys(table))
					}
					if !fetched(f) {
						t.Errorf("task %s: no download of the guide writes %s (downloads %+v)", name, f, downloads)
					}
				}
			}
			for row, used := range table {
				if !used {
					t.Errorf("the guide's table names %s, which the spec does not read", row)
				}
			}
		})
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
