// Package declfile reads a workflow declaration from a YAML file (the
// form DESIGN.md and docs/extending.md describe) into a study.Workflow,
// refusing a malformed one with the file, the line and what to do.
//
//	name: debate
//	doc: two generators answer twice, each seeing the other's previous answer; the aggregator picks one
//	stages:
//	  - {name: debaters, kind: answerer, role: generator, agents: 2, sees: [others]}
//	  - {name: aggregator, kind: selector, role: aggregator, reads: debaters}
//	loop: {from: debaters, to: debaters, max: 2}
//	final: aggregator
package declfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/marlowlab/marlow/harness/study"
)

// What a stage may see besides the problem (its sees list).
const (
	SeesProblem  = "problem"  // every stage sees it; naming it is allowed
	SeesFeedback = "feedback" // Stage.Revises
	SeesOthers   = "others"   // Stage.Others
)

// Error is one fault of a declaration file, at a line.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Errors are every fault found, in line order.
type Errors []Error

func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Load reads and parses the declaration file path.
func Load(path string) (study.Workflow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return study.Workflow{}, fmt.Errorf("workflow file: %w", err)
	}
	return Parse(path, b)
}

// Parse parses a declaration read from file (named in errors) and checks
// it (study.Workflow.Check). The workflow's Source is file and its Text
// the bytes.
func Parse(file string, b []byte) (study.Workflow, error) {
	p := &parser{file: file, lines: map[string]int{}}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		return study.Workflow{}, Errors{{File: file, Line: yamlLine(err), Msg: "not YAML: " + err.Error() + " (see docs/extending.md for the form)"}}
	}
	w := study.Workflow{Source: file, Text: string(b)}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return w, Errors{{File: file, Line: max(1, doc.Line), Msg: "a workflow declaration is a mapping with name, stages and final"}}
	}
	p.workflow(doc.Content[0], &w)
	if len(p.errs) == 0 {
		for _, e := range w.Check() {
			p.errs = append(p.errs, Error{File: file, Line: p.lineOf(e), Msg: e.Error()})
		}
	}
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b Error) int { return a.Line - b.Line })
		return w, p.errs
	}
	return w, nil
}

// yamlLine finds the line in a YAML error's text ("yaml: line N: ..."),
// 1 when it names none.
func yamlLine(err error) int {
	var te *yaml.TypeError
	s := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		s = te.Errors[0]
	}
	if i := strings.Index(s, "line "); i >= 0 {
		j := i + 5
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if n, err := strconv.Atoi(s[i+5 : j]); err == nil {
			return n
		}
	}
	return 1
}

type parser struct {
	file string
	errs Errors
	// lines maps "field" (workflow), "loop.field" and "stageN.field" (and
	// "stageN" itself) to their lines.
	lines map[string]int
}

func (p *parser) bad(line int, format string, args ...any) {
	p.errs = append(p.errs, Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// lineOf places a declaration fault: its field's line, else its stage's,
// else the first line.
func (p *parser) lineOf(e study.DeclError) int {
	key := e.Field
	if e.Stage >= 0 {
		prefix := "stage" + strconv.Itoa(e.Stage)
		if n, ok := p.lines[prefix+"."+e.Field]; ok {
			return n
		}
		return p.lines[prefix]
	}
	if n, ok := p.lines[key]; ok {
		return n
	}
	if i := strings.IndexByte(key, '.'); i >= 0 {
		if n, ok := p.lines[key[:i]]; ok {
			return n
		}
	}
	return 1
}

// fields walks a mapping's keys, refusing unknown and repeated ones.
func (p *parser) fields(m *yaml.Node, where string, known []string, f func(key string, v *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch {
		case !slices.Contains(known, k.Value):
			p.bad(k.Line, "%s: unknown field %q: use %s", where, k.Value, strings.Join(known, ", "))
		case seen[k.Value]:
			p.bad(k.Line, "%s: field %q given twice: keep one", where, k.Value)
		default:
			seen[k.Value] = true
			f(k.Value, v)
		}
	}
}

func (p *parser) str(v *yaml.Node, what string) string {
	if v.Kind != yaml.ScalarNode {
		p.bad(v.Line, "%s: want a word, got a %s", what, kindName(v))
		return ""
	}
	return v.Value
}

// count reads a number or a setting's name.
func (p *parser) count(v *yaml.Node, what string) study.Count {
	s := p.str(v, what)
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 {
			p.bad(v.Line, "%s: %d is below 1: give a positive number or a setting", what, n)
		}
		return study.Count{Fixed: n}
	}
	return study.Count{Setting: s}
}

func kindName(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "scalar"
}

func (p *parser) workflow(m *yaml.Node, w *study.Workflow) {
	p.fields(m, "workflow", []string{"name", "doc", "stages", "loop", "final"}, func(key string, v *yaml.Node) {
		p.lines[key] = v.Line
		switch key {
		case "name":
			w.Name = p.str(v, "name")
		case "doc":
			w.Doc = p.str(v, "doc")
		case "final":
			w.Final = p.str(v, "final")
		case "stages":
			if v.Kind != yaml.SequenceNode {
				p.bad(v.Line, "stages: want a list of stages, got a %s", kindName(v))
				return
			}
			for i, sv := range v.Content {
				w.Stages = append(w.Stages, p.stage(i, sv))
			}
		case "loop":
			if v.Kind != yaml.MappingNode {
				p.bad(v.Line, "loop: want a mapping (from, to, until, max), got a %s", kindName(v))
				return
			}
			l := &study.Loop{}
			p.fields(v, "loop", []string{"from", "to", "until", "max"}, func(key string, lv *yaml.Node) {
				p.lines["loop."+key] = lv.Line
				switch key {
				case "from":
					l.First = p.str(lv, "loop.from")
				case "to":
					l.Last = p.str(lv, "loop.to")
				case "until":
					l.Until = p.str(lv, "loop.until")
				case "max":
					l.Max = p.count(lv, "loop.max")
				}
			})
			w.Loop = l
		}
	})
	for _, key := range []string{"name", "stages", "final"} {
		if _, ok := p.lines[key]; !ok {
			p.bad(m.Line, "workflow: field %q is missing: give it (see docs/extending.md)", key)
		}
	}
}

func (p *parser) stage(i int, m *yaml.Node) study.Stage {
	var s study.Stage
	prefix := "stage" + strconv.Itoa(i)
	p.lines[prefix] = m.Line
	where := fmt.Sprintf("stage %d", i+1)
	if m.Kind != yaml.MappingNode {
		p.bad(m.Line, "%s: want a mapping (name, kind, role, ...), got a %s", where, kindName(m))
		return s
	}
	p.fields(m, where, []string{"name", "kind", "role", "agents", "per_strategy", "most", "reads", "sees"}, func(key string, v *yaml.Node) {
		p.lines[prefix+"."+key] = v.Line
		switch key {
		case "name":
			s.Name = p.str(v, where+": name")
		case "kind":
			s.Kind = study.Kind(p.str(v, where+": kind"))
		case "role":
			s.Role = p.str(v, where+": role")
		case "agents":
			s.Agents = p.count(v, where+": agents")
		case "per_strategy":
			s.PerStrategy = p.str(v, where+": per_strategy")
		case "most":
			s.Most = p.count(v, where+": most")
		case "reads":
			s.Reads = p.str(v, where+": reads")
		case "sees":
			if v.Kind != yaml.SequenceNode {
				p.bad(v.Line, "%s: sees: want a list (%s, %s, %s), got a %s", where, SeesProblem, SeesFeedback, SeesOthers, kindName(v))
				return
			}
			for _, x := range v.Content {
				switch p.str(x, where+": sees") {
				case SeesProblem:
				case SeesFeedback:
					s.Revises = true
				case SeesOthers:
					s.Others = true
				default:
					p.bad(x.Line, "%s: sees: unknown %q: use %s, %s or %s (an earlier stage's outputs are read with reads)", where, x.Value, SeesProblem, SeesFeedback, SeesOthers)
				}
			}
		}
	})
	return s
}
