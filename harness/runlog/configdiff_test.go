package runlog

import (
	"reflect"
	"testing"
)

func TestConfigDiff(t *testing.T) {
	type inner struct {
		LR    float64           `json:"lr"`
		Roles map[string]int    `json:"roles"`
		List  []string          `json:"list"`
		Extra map[string]string `json:"extra,omitempty"`
	}
	type cfg struct {
		A int   `json:"a"`
		G inner `json:"grpo"`
	}
	base := cfg{A: 1, G: inner{LR: 0.5, Roles: map[string]int{"generator": 2}, List: []string{"x", "y"}}}
	cases := []struct {
		name string
		old  any
		cur  cfg
		want []string
	}{
		{"same", base, base, nil},
		{"float", base, cfg{A: 1, G: inner{LR: 0.25, Roles: map[string]int{"generator": 2}, List: []string{"x", "y"}}},
			[]string{"grpo.lr: 0.5 -> 0.25"}},
		{"map and list", base, cfg{A: 2, G: inner{LR: 0.5, Roles: map[string]int{"evaluator": 2}, List: []string{"x"}}},
			[]string{"a: 1 -> 2", "grpo.list[1]: \"y\" -> (absent)", "grpo.roles.evaluator: (absent) -> 2", "grpo.roles.generator: 2 -> (absent)"}},
		{"decoded manifest", map[string]any{"a": 1.0, "grpo": map[string]any{"lr": 0.5, "roles": map[string]any{"generator": 2}, "list": []any{"x", "y"}}}, base, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ConfigDiff(c.old, c.cur)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q\nwant %q", got, c.want)
			}
		})
	}
	if _, err := ConfigDiff(map[string]any{"x": func() {}}, base); err == nil {
		t.Fatal("an unencodable config gave no error")
	}
}
