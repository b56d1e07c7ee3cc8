package scenario

import (
	"encoding/json"
	"reflect"
	"slices"
)

// SchemaID is the $id of the published schema.
const SchemaID = "https://svclab.dev/schemas/scenario.json"

// oneOfGroups lists, per struct type, the fields of which exactly one must
// be set.
var oneOfGroups = map[reflect.Type][]string{
	reflect.TypeFor[Check]():          {CheckAPI, CheckProbe, CheckDataplane, CheckRightFix, CheckAnswer, CheckKubeProxyConfig},
	reflect.TypeFor[DataplaneCheck](): {"rules", "conntrack", "conntrackMax", "proxyMode", "loadBalancer", "follows"},
	reflect.TypeFor[ProbeSource]():    {"node", "pod", "podSelector", "witness", "outside"},
}

type obj = map[string]any

// Schema returns the JSON Schema (draft 2020-12) of scenario.yaml, generated
// from the format's types and their rule tags, with the fault names and
// parameters of faults (nil: DefaultFaults). scenarios/schema.json is its
// output for the default faults.
func Schema(faults *Registry) ([]byte, error) {
	if faults == nil {
		faults = DefaultFaults()
	}
	g := &schemaGen{defs: obj{}, faults: faults}
	root := g.structSchema(reflect.TypeFor[Scenario]())
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = SchemaID
	root["title"] = "svclab scenario"
	root["description"] = "One scenario of svclab: scenarios/ID/scenario.yaml."
	root["$defs"] = g.defs
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

type schemaGen struct {
	defs   obj
	faults *Registry
}

// ref returns a reference to the definition of struct type t, making it.
func (g *schemaGen) ref(t reflect.Type) obj {
	name := t.Name()
	if _, ok := g.defs[name]; !ok {
		g.defs[name] = obj{} // placeholder against recursion
		g.defs[name] = g.structSchema(t)
	}
	return obj{"$ref": "#/$defs/" + name}
}

func (g *schemaGen) structSchema(t reflect.Type) obj {
	props := obj{}
	var required []string
	for _, f := range fieldsOf(t) {
		s := g.typeSchema(t.Field(f.index).Type, f.rules)
		if f.doc != "" {
			if _, isRef := s["$ref"]; isRef {
				s = obj{"allOf": []any{s}}
			}
			s["description"] = f.doc
		}
		props[f.name] = s
		if f.rules.required {
			required = append(required, f.name)
		}
	}
	s := obj{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	if group, ok := oneOfGroups[t]; ok {
		var alts []any
		for _, name := range group {
			alt := obj{"required": []string{name}}
			if p, ok := props[name].(obj); ok && p["type"] == "boolean" {
				// A flag counts when it is set: outside: false is no source.
				alt["properties"] = obj{name: obj{"const": true}}
			}
			alts = append(alts, alt)
		}
		s["oneOf"] = alts
	}
	if t == reflect.TypeFor[Fault]() {
		g.faultRules(s)
	}
	return s
}

func (g *schemaGen) typeSchema(t reflect.Type, r fieldRules) obj {
	switch t {
	case scalarType:
		return obj{"type": []string{"string", "number", "boolean"}}
	case paramsType:
		scalar := obj{"type": []string{"string", "number", "boolean"}}
		return obj{"type": "object", "additionalProperties": obj{"anyOf": []any{scalar, obj{"type": "array", "items": scalar}}}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.typeSchema(t.Elem(), r)
	case reflect.Struct:
		return g.ref(t)
	case reflect.String:
		s := obj{"type": "string"}
		switch {
		case r.enum != "":
			s["enum"] = enums[r.enum]
		case r.pattern != "":
			s["pattern"] = patterns[r.pattern].re
		case r.nonblank:
			s["pattern"] = `\S`
		case r.required:
			s["minLength"] = 1
		}
		return s
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int, reflect.Float64:
		s := obj{"type": "number"}
		if t.Kind() == reflect.Int {
			s["type"] = "integer"
		}
		if r.min != nil {
			s["minimum"] = *r.min
		}
		if r.max != nil {
			s["maximum"] = *r.max
		}
		if r.gt != nil {
			s["exclusiveMinimum"] = *r.gt
		}
		return s
	case reflect.Slice:
		item := fieldRules{enum: r.enum, pattern: r.pattern, nonblank: r.nonblank}
		s := obj{"type": "array", "items": g.typeSchema(t.Elem(), item)}
		if r.minItems > 0 {
			s["minItems"] = r.minItems
		}
		if r.unique {
			s["uniqueItems"] = true
		}
		return s
	case reflect.Map:
		return obj{"type": "object", "additionalProperties": g.typeSchema(t.Elem(), fieldRules{})}
	}
	panic("scenario: no schema for " + t.String())
}

// faultRules adds the fault names and, per fault, its parameters.
func (g *schemaGen) faultRules(s obj) {
	names := g.faults.Names()
	props := s["properties"].(obj)
	props["name"].(obj)["enum"] = names
	var rules []any
	for _, name := range names {
		kind, _ := g.faults.Lookup(name)
		specs, ok := kind.(interface{ ParamSpecs() []ParamSpec })
		if !ok {
			continue
		}
		pprops := obj{}
		var required []string
		for _, p := range specs.ParamSpecs() {
			pprops[p.Name] = paramSchema(p)
			if p.Required {
				required = append(required, p.Name)
			}
		}
		params := obj{"type": "object", "properties": pprops, "additionalProperties": false}
		then := obj{"properties": obj{"params": params}}
		if len(required) > 0 {
			params["required"] = required
			then["required"] = []string{"params"}
		}
		rules = append(rules, obj{
			"if":   obj{"properties": obj{"name": obj{"const": name}}, "required": []string{"name"}},
			"then": then,
		})
	}
	s["allOf"] = rules
}

func paramSchema(p ParamSpec) obj {
	var s obj
	switch p.Type {
	case ParamInt:
		s = obj{"type": "integer", "minimum": p.Min}
		if p.Max > 0 {
			s["maximum"] = p.Max
		}
	case ParamBool:
		s = obj{"type": "boolean"}
	case ParamIntOrString:
		s = obj{"anyOf": []any{obj{"type": "integer", "minimum": 1, "maximum": 65535}, obj{"type": "string", "pattern": `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`}}}
	case ParamNode:
		s = obj{"type": "string", "pattern": `^(control-plane|worker[0-9]*)$`}
	case ParamObject:
		s = obj{"type": "string", "pattern": `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`}
	default:
		s = obj{"type": "string"}
		if len(p.Enum) > 0 {
			s["enum"] = slices.Clone(p.Enum)
		}
	}
	doc := p.Doc
	if p.Type == ParamObject {
		doc = "the name of a " + p.Kind + ": " + doc
	}
	s["description"] = doc
	return s
}
