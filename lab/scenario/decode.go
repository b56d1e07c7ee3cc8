package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// decoder turns a YAML node tree into the format's structs strictly: every
// unknown field, wrong type and rule violation becomes a problem with the
// field path and line, and decoding goes on with the rest.
type decoder struct {
	file     string
	problems Problems
	// lines maps field paths to the line of their value, so that later
	// checks can locate what they complain about.
	lines map[string]int
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, lines: map[string]int{}}
}

func (d *decoder) add(line int, path, msg string) {
	d.problems = append(d.problems, Problem{File: d.file, Line: line, Field: path, Message: msg})
}

// lineOf is the line of path, or of its closest ancestor the file has.
func (d *decoder) lineOf(path string) int {
	for {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return d.lines[""]
		}
		path = path[:i]
	}
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decodeScenario decodes data (the contents of a scenario.yaml) into s.
func (d *decoder) decodeScenario(data []byte, s *Scenario) {
	d.decodeDocument(data, s, "a scenario.yaml")
}

// decodeDocument decodes data, a single YAML document of what (for
// messages: "a scenario.yaml"), into v, a pointer to a format type.
func (d *decoder) decodeDocument(data []byte, v any, what string) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		line, msg := 1, err.Error()
		if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		} else {
			msg = strings.TrimPrefix(msg, "yaml: ")
		}
		if errors.Is(err, io.EOF) {
			msg = "the file is empty"
		}
		d.add(line, "", "invalid YAML: "+msg)
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.add(extra.Line, "", what+" holds a single YAML document; remove the '---' and what follows")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	d.lines[""] = root.Line
	d.value(root, reflect.ValueOf(v).Elem(), "")
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// kindName says what a node is, for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.Tag {
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "null"
	}
	return "a " + strings.TrimPrefix(n.Tag, "!!")
}

var (
	scalarType = reflect.TypeFor[Scalar]()
	paramsType = reflect.TypeFor[Params]()
)

// value decodes n into v (of a format type).
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	d.lines[path] = n.Line
	if n.Kind == yaml.AliasNode {
		d.add(n.Line, path, "YAML aliases are not allowed in scenario files; write the value out")
		return
	}
	switch {
	case v.Type() == scalarType:
		if n.Kind != yaml.ScalarNode {
			d.add(n.Line, path, "must be a single value, not "+kindName(n))
			return
		}
		v.SetString(n.Value)
		return
	case v.Type() == paramsType:
		d.params(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if n.Tag == "!!null" {
			return
		}
		p := reflect.New(v.Type().Elem())
		d.value(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.structValue(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.add(n.Line, path, "must be a list, not "+kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.add(n.Line, path, "must be a mapping, not "+kindName(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				d.add(k.Line, path, "keys must be strings")
				continue
			}
			e := reflect.New(v.Type().Elem()).Elem()
			d.value(val, e, join(path, k.Value))
			m.SetMapIndex(reflect.ValueOf(k.Value), e)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode {
				hint = " (quote it)"
			}
			d.add(n.Line, path, "must be a string, not "+kindName(n)+hint)
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			d.add(n.Line, path, "must be an integer, not "+kindName(n))
			return
		}
		var i int64
		if err := n.Decode(&i); err != nil {
			d.add(n.Line, path, "must be an integer: "+err.Error())
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			d.add(n.Line, path, "must be a number, not "+kindName(n))
			return
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.add(n.Line, path, "must be a finite number")
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.add(n.Line, path, "must be true or false, not "+kindName(n))
			return
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			d.add(n.Line, path, "must be true or false: "+err.Error())
			return
		}
		v.SetBool(b)
	default:
		panic(fmt.Sprintf("scenario: cannot decode into %s", v.Type()))
	}
}

func (d *decoder) structValue(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.add(n.Line, path, "must be a mapping, not "+kindName(n))
		return
	}
	fields := fieldsOf(v.Type())
	present, failed := map[string]bool{}, map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		var f *structField
		for j := range fields {
			if fields[j].name == k.Value {
				f = &fields[j]
			}
		}
		if f == nil {
			d.add(k.Line, join(path, k.Value), "unknown field; the fields here are "+strings.Join(fieldNames(fields), ", "))
			continue
		}
		fp := join(path, f.name)
		d.lines[fp] = val.Line
		if val.Tag == "!!null" {
			continue
		}
		present[f.name] = true
		before := len(d.problems)
		d.value(val, v.Field(f.index), fp)
		failed[f.name] = len(d.problems) > before
	}
	for _, f := range fields {
		if failed[f.name] {
			continue // already reported; its rules would only repeat it
		}
		fp := join(path, f.name)
		checkValue(f.rules, v.Field(f.index), present[f.name], fp, func(p, msg string) { d.add(d.lineOf(p), p, msg) })
	}
}

// params decodes a fault's parameters: a mapping of names to scalars or
// lists of scalars.
func (d *decoder) params(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.add(n.Line, path, "must be a mapping, not "+kindName(n))
		return
	}
	p := Params{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		pp := join(path, k.Value)
		d.lines[pp] = val.Line
		if val.Kind == yaml.MappingNode || val.Kind == yaml.AliasNode {
			d.add(val.Line, pp, "must be a single value or a list, not "+kindName(val))
			continue
		}
		var x any
		if err := val.Decode(&x); err != nil {
			d.add(val.Line, pp, err.Error())
			continue
		}
		p[k.Value] = x
	}
	v.Set(reflect.ValueOf(p))
}
