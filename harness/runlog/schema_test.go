package runlog

import (
	"flag"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite SCHEMA.md from the schema definitions")

// TestSchemaDoc keeps SCHEMA.md in sync with the definitions; run
// `go generate ./harness/runlog` (or this test with -update) after a change.
func TestSchemaDoc(t *testing.T) {
	want := SchemaMarkdown()
	if *update {
		if err := os.WriteFile("SCHEMA.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("SCHEMA.md")
	if err != nil {
		t.Fatalf("%v (run go generate ./harness/runlog)", err)
	}
	if string(got) != want {
		t.Fatal("SCHEMA.md is out of date: run go generate ./harness/runlog")
	}
}

// TestSchemaDefs checks each table definition against its row type: every
// column named once, snake_case, and documented, and every field of the
// row struct stored in exactly one column.
func TestSchemaDefs(t *testing.T) {
	tests := []struct {
		info   tableInfo
		fields int
		refs   func() []any
	}{
		{stepsDef.info(), numFields(StepRow{}), func() []any { return refsOf(stepsDef) }},
		{evalsDef.info(), numFields(EvalRow{}), func() []any { return refsOf(evalsDef) }},
		// samples/ stores the prompt by hash (its text is in prompts/);
		// version 1 stored the text and no hash, and no fallback (version 3)
		{samplesDef.info(), numFields(SampleRow{}) - 1, func() []any { return refsOf(samplesDef) }},
		{samplesV1Def.info(), numFields(SampleRow{}) - 2, func() []any { return refsOf(samplesV1Def) }},
		{promptsDef.info(), numFields(PromptRow{}), func() []any { return refsOf(promptsDef) }},
		{timingDef.info(), numFields(TimingRow{}), func() []any { return refsOf(timingDef) }},
	}
	for _, tc := range tests {
		t.Run(tc.info.name, func(t *testing.T) {
			if len(tc.info.cols) != tc.fields {
				t.Fatalf("%d columns for %d fields", len(tc.info.cols), tc.fields)
			}
			names := map[string]bool{}
			for _, c := range tc.info.cols {
				if names[c.name] || c.name != strings.ToLower(c.name) || strings.ContainsAny(c.name, " -") || c.doc == "" {
					t.Errorf("column %q: repeated, not snake_case or undocumented", c.name)
				}
				names[c.name] = true
			}
			seen := map[any]bool{}
			for i, r := range tc.refs() {
				if seen[r] {
					t.Errorf("column %d stores a field already stored", i)
				}
				seen[r] = true
			}
			want := strconv.Itoa(SchemaVersion)
			if tc.info.reads(1) && !tc.info.reads(SchemaVersion) {
				want = "1"
			}
			if v := tc.info.schema.Metadata().Values(); len(v) != 2 || v[0] != want || v[1] != tc.info.name {
				t.Errorf("schema metadata %v", v)
			}
		})
	}
}

func numFields(v any) int { return reflect.TypeOf(v).NumField() }

// refsOf returns the field pointer of each column for one row value.
func refsOf[R any](t *tableDef[R]) []any {
	var r R
	out := make([]any, len(t.cols))
	for i, c := range t.cols {
		out[i] = c.ref(&r)
	}
	return out
}
