package scenario

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Domains are the CKA curriculum domains a scenario can train.
var Domains = []string{
	"Services & Networking",
	"Troubleshooting",
	"Cluster Architecture, Installation & Configuration",
	"Workloads & Scheduling",
	"Storage",
}

// enums are the value sets that rule:"enum=NAME" refers to.
var enums = map[string][]string{
	"domains":             Domains,
	"difficulties":        {"easy", "medium", "hard"},
	"proxyModes":          {ProxyModeNFTables, ProxyModeIPTables},
	"apiOps":              {OpEquals, OpNotEquals, OpContains, OpNotContains, OpMatches, OpExists, OpAbsent, OpCountAtLeast, OpCountEquals},
	"configOps":           {OpEquals, OpNotEquals, OpAtMost, OpAtLeast},
	"protocols":           {"http", "tcp", "udp", "dns"},
	"vias":                {ViaClusterIP, ViaDNSName, ViaNodePort, ViaLoadBalancer},
	"outcomes":            {OutcomeSuccess, OutcomeRefused, OutcomeTimeout},
	"clientIPs":           {"preserved", "masqueraded"},
	"traffics":            {"internal", "external"},
	"nodeAddresses":       {"primary", "secondary"},
	"ruleVerdicts":        {RulesEndpoints, RulesReject, RulesDrop, RulesAbsent},
	"l4protocols":         {"tcp", "udp"},
	"conntrackExpects":    {ConntrackNoStaleEntries, ConntrackNoEntries, ConntrackKeptFromStart},
	"loadBalancerExpects": {LoadBalancerSends, LoadBalancerSkips},
	"rightFixRules":       {RightFixUIDUnchanged, RightFixUnchanged, RightFixExists},
}

// patterns are the regular expressions (in the dialect both Go and JSON
// Schema understand) that rule:"pattern=NAME" refers to, with what to tell
// an author whose value does not match.
var patterns = map[string]struct{ re, want string }{
	"name":      {`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, "must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit"},
	"file":      {`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$`, "must be a relative path inside the scenario's directory (letters, digits, '_', '.', '-' and '/'; no '..')"},
	"httpPath":  {`^/`, "must start with /"},
	"sourceURL": {`^https://(kubernetes\.io/docs/|github\.com/kubernetes/|docs\.kernel\.org/|man7\.org/linux/man-pages/)[^\s]+$`, "must be an https URL of the Kubernetes documentation (kubernetes.io/docs), of github.com/kubernetes (KEPs, source), of docs.kernel.org or of man7.org's man pages"},
	"duration":  {`^([0-9]+(\.[0-9]+)?(ms|s|m))+$`, "must be a duration such as 500ms, 2s or 1m"},
}

var (
	compiledMu       sync.Mutex
	compiledPatterns = map[string]*regexp.Regexp{}
)

func pattern(name string) *regexp.Regexp {
	compiledMu.Lock()
	defer compiledMu.Unlock()
	re, ok := compiledPatterns[name]
	if !ok {
		re = regexp.MustCompile(patterns[name].re)
		compiledPatterns[name] = re
	}
	return re
}

// fieldRules are the parsed rule tag of one field.
type fieldRules struct {
	required, nonblank, unique bool
	enum, pattern              string
	min, max, gt               *float64
	minItems                   int
}

func parseRules(tag string) fieldRules {
	var r fieldRules
	if tag == "" {
		return r
	}
	num := func(s string) *float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			panic(fmt.Sprintf("scenario: bad number %q in rule tag %q", s, tag))
		}
		return &f
	}
	for _, part := range strings.Split(tag, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "required":
			r.required = true
		case "nonblank":
			r.nonblank = true
		case "unique":
			r.unique = true
		case "enum":
			if _, ok := enums[v]; !ok {
				panic("scenario: unknown enum " + v)
			}
			r.enum = v
		case "pattern":
			if _, ok := patterns[v]; !ok {
				panic("scenario: unknown pattern " + v)
			}
			r.pattern = v
		case "min":
			r.min = num(v)
		case "max":
			r.max = num(v)
		case "gt":
			r.gt = num(v)
		case "minItems":
			r.minItems = int(*num(v))
		default:
			panic(fmt.Sprintf("scenario: unknown rule %q in tag %q", k, tag))
		}
	}
	return r
}

// structField is one field of a format struct.
type structField struct {
	index int
	name  string // the YAML name
	doc   string
	rules fieldRules
}

var fieldCache sync.Map // reflect.Type → []structField

// fieldsOf lists the YAML fields of a format struct type.
func fieldsOf(t reflect.Type) []structField {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]structField)
	}
	var out []structField
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("yaml")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, structField{index: i, name: name, doc: f.Tag.Get("doc"), rules: parseRules(f.Tag.Get("rule"))})
	}
	fieldCache.Store(t, out)
	return out
}

func fieldNames(fs []structField) []string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return names
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// checkValue applies a field's rules to its decoded value and returns the
// problems as (path, message) pairs through report. present says whether the
// field was in the file.
func checkValue(r fieldRules, v reflect.Value, present bool, path string, report func(path, msg string)) {
	if !present {
		if r.required {
			report(path, "is required")
		}
		return
	}
	if v.Kind() == reflect.String && v.Len() == 0 && r.required && !r.nonblank {
		report(path, "is required")
		return
	}
	switch v.Kind() {
	case reflect.String:
		checkString(r, v.String(), path, report)
	case reflect.Int, reflect.Float64:
		var f float64
		if v.Kind() == reflect.Int {
			f = float64(v.Int())
		} else {
			f = v.Float()
		}
		switch {
		case r.gt != nil && f <= *r.gt:
			if *r.gt == 0 {
				report(path, "must be a positive number")
			} else {
				report(path, "must be greater than "+formatNumber(*r.gt))
			}
		case r.min != nil && f < *r.min:
			report(path, "must be at least "+formatNumber(*r.min))
		case r.max != nil && f > *r.max:
			report(path, "must be at most "+formatNumber(*r.max))
		}
	case reflect.Slice:
		if v.Len() < r.minItems {
			if r.minItems == 1 {
				report(path, "must not be empty")
			} else {
				report(path, fmt.Sprintf("must have at least %d items", r.minItems))
			}
		}
		if v.Type().Elem().Kind() == reflect.String {
			seen := map[string]int{}
			for i := range v.Len() {
				s := v.Index(i).String()
				ip := fmt.Sprintf("%s[%d]", path, i)
				checkString(r, s, ip, report)
				if j, dup := seen[s]; dup && r.unique {
					report(ip, fmt.Sprintf("repeats %s[%d]", path, j))
				}
				seen[s] = i
			}
		}
	}
}

func checkString(r fieldRules, s, path string, report func(path, msg string)) {
	switch {
	case r.nonblank && strings.TrimSpace(s) == "":
		report(path, "must not be empty")
	case r.enum != "" && s != "" && !contains(enums[r.enum], s):
		report(path, fmt.Sprintf("%q is not one of %s", s, quoteList(enums[r.enum])))
	case r.pattern != "" && s != "" && !pattern(r.pattern).MatchString(s):
		report(path, fmt.Sprintf("%q %s", s, patterns[r.pattern].want))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
