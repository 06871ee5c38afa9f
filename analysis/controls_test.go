package analysis

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestPositiveControlsNamed: every detector in PositiveControls names a
// control test of controls_slow_test.go (run by `make check-slow`), and
// every detector of that file's tests is in PositiveControls: a detector
// is listed together with its passing control test, and only then.
func TestPositiveControlsNamed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "controls_slow_test.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "TestControl") {
			tests[fn.Name.Name] = true
		}
	}
	named := map[string]bool{}
	for _, d := range Detectors {
		name, ok := PositiveControls[d]
		if !ok {
			continue
		}
		if !tests[name] {
			t.Errorf("detector %d: PositiveControls names %q, not a TestControl function of controls_slow_test.go (%v)", d, name, tests)
		}
		named[name] = true
	}
	for name := range tests {
		if !named[name] {
			t.Errorf("controls_slow_test.go has %s, which no detector of PositiveControls names", name)
		}
	}
	if len(PositiveControls) > len(Detectors) {
		t.Errorf("PositiveControls has %d entries for %d detectors", len(PositiveControls), len(Detectors))
	}
}
