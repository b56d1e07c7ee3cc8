package scenario

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Manifest is one setup manifest file, decoded.
type Manifest struct {
	// File is the path as written in setup.manifests.
	File string
	// Objects are the file's objects in order.
	Objects []Object
}

// Object is one Kubernetes object of a manifest.
type Object struct {
	// Line is the first line of the object's YAML document.
	Line int
	GVK  schema.GroupVersionKind
	// Namespace is the object's namespace, defaulted to "default" for
	// namespaced kinds.
	Namespace string
	Name      string
	// JSON is the object as written, in JSON (what a client applies).
	JSON []byte
	// Typed is the object decoded into its client-go type.
	Typed runtime.Object
}

type document struct {
	line int
	data []byte
}

// splitDocuments splits a multi-document YAML stream on "---" lines,
// skipping documents with nothing but comments.
func splitDocuments(data []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, lineNo, content := 1, 0, false
	flush := func(next int) {
		if content {
			docs = append(docs, document{line: start, data: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
		start, content = next, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), len(data)+1)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if line == "---" || strings.HasPrefix(line, "--- ") || line == "..." {
			flush(lineNo + 1)
			continue
		}
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			if !content {
				start = lineNo
			}
			content = true
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush(lineNo + 1)
	return docs
}

// ClusterScoped says whether objects of kind have no namespace.
func ClusterScoped(kind string) bool { return clusterScoped[kind] }

// clusterScoped are the kinds a scenario may create that have no namespace.
var clusterScoped = map[string]bool{
	"Namespace": true, "Node": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"PersistentVolume": true, "StorageClass": true, "PriorityClass": true,
	"IngressClass": true, "ServiceCIDR": true, "IPAddress": true,
}

// decodeManifest decodes the objects of a manifest file. Problems name the
// file (display) and the first line of the offending document.
func decodeManifest(data []byte, file, display string) (Manifest, Problems) {
	m := Manifest{File: file}
	var problems Problems
	bad := func(line int, field, format string, args ...any) {
		problems = append(problems, Problem{File: display, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	docs := splitDocuments(data)
	if len(docs) == 0 {
		bad(0, "", "the manifest holds no objects")
	}
	for _, d := range docs {
		js, err := yaml.YAMLToJSON(d.data)
		if err != nil {
			line, msg := d.line, strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
			if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
				n, _ := strconv.Atoi(m[1])
				line, msg = d.line+n-1, m[2]
			}
			bad(line, "", "invalid YAML: %s", msg)
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(d.data, &tm); err != nil || tm.Kind == "" || tm.APIVersion == "" {
			bad(d.line, "", "not a Kubernetes object: it needs apiVersion and kind")
			continue
		}
		gvk := tm.GroupVersionKind()
		if gvk.Kind == "List" {
			bad(d.line, "", "write the objects as separate YAML documents (---) rather than a List")
			continue
		}
		typed, err := scheme.Scheme.New(gvk)
		if err != nil {
			bad(d.line, "", "unknown kind %s in apiVersion %s: the lab knows the built-in Kubernetes kinds only", gvk.Kind, tm.APIVersion)
			continue
		}
		strict, err := kjson.UnmarshalStrict(js, typed)
		if err != nil {
			bad(d.line, "", "%s %s does not decode: %s", gvk.Kind, tm.APIVersion, strings.TrimPrefix(err.Error(), "json: "))
			continue
		}
		obj := Object{Line: d.line, GVK: gvk, JSON: js, Typed: typed}
		if acc, ok := typed.(metav1.Object); ok {
			obj.Name, obj.Namespace = acc.GetName(), acc.GetNamespace()
		}
		for _, e := range strict {
			bad(d.line, "", "%s %q: %s", gvk.Kind, obj.Name, e.Error())
		}
		if obj.Name == "" {
			bad(d.line, "", "%s has no metadata.name", gvk.Kind)
		}
		if obj.Namespace == "" && !clusterScoped[gvk.Kind] {
			obj.Namespace = "default"
		}
		m.Objects = append(m.Objects, obj)
	}
	return m, problems
}
