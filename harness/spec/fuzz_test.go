package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the parser: it must return a spec or an
// error, never panic, and a spec it accepts must plan or fail cleanly.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"smoke.yaml", "demo.yaml", "mini.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "seeds", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(baseSpec))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("grpo: {max_new_tokens: {default: 1}}\ntasks: {t: {grpo: {lora: {targets: []}}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", "/nonexistent/fuzz.yaml", data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if _, err := Plan(s); err != nil && err.Error() == "" {
			t.Fatal("empty plan error message")
		}
	})
}
