package spec

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// FieldError is one problem found in a spec file.
type FieldError struct {
	File string // spec file
	Line int    // 1-based line, 0 when unknown
	Path string // key path, e.g. "grpo.clip_high"
	Msg  string
}

func (e FieldError) Error() string {
	where := e.File + ":"
	if e.Line > 0 {
		where += strconv.Itoa(e.Line) + ":"
	}
	if e.Path == "" {
		return where + " " + e.Msg
	}
	return where + " " + e.Path + ": " + e.Msg
}

// Error collects every problem of a spec file, sorted by line then path.
type Error struct {
	Errors []FieldError
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.Error()
	}
	if len(lines) == 1 {
		return "invalid spec: " + lines[0]
	}
	return fmt.Sprintf("invalid spec (%d errors):\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// errList accumulates field errors without duplicates.
type errList struct {
	file  string
	items []FieldError
	seen  map[FieldError]bool
}

func (l *errList) add(line int, path, format string, args ...any) {
	fe := FieldError{File: l.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)}
	if l.seen == nil {
		l.seen = map[FieldError]bool{}
	}
	if l.seen[fe] {
		return
	}
	l.seen[fe] = true
	l.items = append(l.items, fe)
}

// err returns the collected errors as an *Error, or nil when there are none.
func (l *errList) err() error {
	if len(l.items) == 0 {
		return nil
	}
	items := append([]FieldError(nil), l.items...)
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].Line != items[j].Line {
			return items[i].Line < items[j].Line
		}
		return items[i].Path < items[j].Path
	})
	return &Error{Errors: items}
}

// loc is where a value was set: its full key path and line.
type loc struct {
	path string
	line int
}

// origins maps a key path relative to a section ("lora.rank") to where it
// was last set. Validation uses it to point at the right line, including
// values that came from an override.
type origins map[string]loc

func (o origins) clone() origins {
	c := make(origins, len(o))
	for k, v := range o {
		c[k] = v
	}
	return c
}

// defaulter is implemented by section types whose zero value is not their
// default; the decoder calls setDefaults on every freshly allocated value.
type defaulter interface{ setDefaults() }

var nodeType = reflect.TypeFor[*yaml.Node]()

// decoder walks a yaml.Node tree into Go values strictly: unknown keys,
// duplicate keys, aliases and wrong scalar types are errors. Decoding onto
// a value that already holds defaults keeps every default that the YAML
// does not mention, so the same walker applies files and overrides.
type decoder struct {
	errs *errList
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path, rel string, org origins) {
	if n.Kind == yaml.AliasNode {
		d.errs.add(n.Line, path, "YAML aliases (*%s) are not supported; write the value out", n.Value)
		return
	}
	if org != nil && rel != "" {
		org[rel] = loc{path, n.Line}
	}
	t := v.Type()
	if t == nodeType {
		v.Set(reflect.ValueOf(n))
		return
	}
	isNull := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
	switch t.Kind() {
	case reflect.Pointer:
		if isNull {
			v.SetZero()
			return
		}
		if v.IsNil() {
			nv := reflect.New(t.Elem())
			if df, ok := nv.Interface().(defaulter); ok {
				df.setDefaults()
			}
			v.Set(nv)
		}
		d.decode(n, v.Elem(), path, rel, org)
	case reflect.Struct:
		if !isNull { // an empty section keeps its defaults
			d.decodeStruct(n, v, path, rel, org)
		}
	case reflect.Map:
		if !isNull {
			d.decodeMap(n, v, path, rel, org)
		}
	case reflect.Slice:
		d.decodeSlice(n, v, path, rel, org)
	default:
		d.scalar(n, v, path)
	}
}

// entries calls fn for each key of a mapping node in order, after
// reporting a node that is not a mapping, keys that are not strings and
// duplicate keys (which are then skipped). kp is the key's full path.
func (d *decoder) entries(n *yaml.Node, path string, fn func(k, val *yaml.Node, key, kp string)) {
	if n.Kind != yaml.MappingNode {
		d.errs.add(n.Line, path, "expected a mapping, got %s", describe(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key, ok := d.key(k, path)
		if !ok {
			continue
		}
		kp := join(path, key)
		if prev, dup := seen[key]; dup {
			d.errs.add(k.Line, kp, "duplicate key (first set on line %d)", prev)
			continue
		}
		seen[key] = k.Line
		fn(k, val, key, kp)
	}
}

// decodeStruct decodes a mapping into a struct's fields, refusing unknown
// keys.
func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path, rel string, org origins) {
	fields := structFields(v.Type())
	d.entries(n, path, func(k, val *yaml.Node, key, kp string) {
		idx, known := fields.index[key]
		if !known {
			hint := didYouMean(key, fields.names)
			if hint != "" {
				hint += " (allowed keys: " + strings.Join(fields.names, ", ") + ")"
			} else {
				hint = " allowed keys: " + strings.Join(fields.names, ", ")
			}
			d.errs.add(k.Line, kp, "unknown key %q;%s", key, hint)
			return
		}
		d.decode(val, v.Field(idx), kp, join(rel, key), org)
		if org != nil {
			org[join(rel, key)] = loc{kp, k.Line} // point at the key
		}
	})
}

// decodeMap decodes a mapping into a map; an entry already present (an
// override of a default) is decoded over, a new one starts from its
// defaults.
func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path, rel string, org origins) {
	t := v.Type()
	if n.Kind == yaml.MappingNode && v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	d.entries(n, path, func(k, val *yaml.Node, key, kp string) {
		kv := reflect.ValueOf(key)
		ev := reflect.New(t.Elem()).Elem()
		if old := v.MapIndex(kv); old.IsValid() {
			ev.Set(old)
		} else if df, ok := ev.Addr().Interface().(defaulter); ok {
			df.setDefaults()
		}
		d.decode(val, ev, kp, join(rel, key), org)
		if org != nil {
			org[join(rel, key)] = loc{kp, k.Line}
		}
		v.SetMapIndex(kv, ev)
	})
}

// decodeSlice decodes a sequence into a new slice.
func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path, rel string, org origins) {
	if n.Kind != yaml.SequenceNode {
		d.errs.add(n.Line, path, "expected a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, el := range n.Content {
		er := ""
		if rel != "" {
			er = fmt.Sprintf("%s[%d]", rel, i)
		}
		d.decode(el, s.Index(i), fmt.Sprintf("%s[%d]", path, i), er, org)
	}
	v.Set(s)
}

func (d *decoder) key(k *yaml.Node, path string) (string, bool) {
	if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			d.errs.add(k.Line, path, "YAML merge keys (<<) are not supported; write the keys out")
			return "", false
		}
		d.errs.add(k.Line, path, "keys must be strings, got %s", describe(k))
		return "", false
	}
	return k.Value, true
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.errs.add(n.Line, path, "expected %s, got %s", kindName(v.Kind()), describe(n))
		return
	}
	tag := n.ShortTag()
	bad := func() { d.errs.add(n.Line, path, "expected %s, got %s", kindName(v.Kind()), describe(n)) }
	switch v.Kind() {
	case reflect.String:
		if tag != "!!str" {
			bad()
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if tag != "!!bool" {
			bad()
			return
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			bad()
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		if tag != "!!int" {
			bad()
			return
		}
		var i int64
		if err := n.Decode(&i); err != nil || v.OverflowInt(i) {
			d.errs.add(n.Line, path, "integer %s is out of range", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Uint64:
		if tag != "!!int" {
			bad()
			return
		}
		var u uint64
		if err := n.Decode(&u); err != nil {
			d.errs.add(n.Line, path, "must be an integer in [0, 18446744073709551615], got %s", n.Value)
			return
		}
		v.SetUint(u)
	case reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			bad()
			return
		}
		var f float64
		if err := n.Decode(&f); err != nil {
			bad()
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.errs.add(n.Line, path, "must be a finite number, got %s", n.Value)
			return
		}
		v.SetFloat(f)
	default:
		d.errs.add(n.Line, path, "internal: unsupported field type %s", v.Type())
	}
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	}
	return "a scalar"
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	switch n.ShortTag() {
	case "!!str":
		return fmt.Sprintf("string %q", v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "number " + v
	case "!!bool":
		return "boolean " + v
	case "!!null":
		return "null (no value)"
	}
	return fmt.Sprintf("%s %q", n.ShortTag(), v)
}

type fieldSet struct {
	index map[string]int
	names []string // sorted
}

func structFields(t reflect.Type) fieldSet {
	fs := fieldSet{index: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || name == "" || !f.IsExported() {
			continue
		}
		fs.index[name] = i
		fs.names = append(fs.names, name)
	}
	sort.Strings(fs.names)
	return fs
}
