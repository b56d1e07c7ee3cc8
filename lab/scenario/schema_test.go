package scenario

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

const schemaFile = "../../scenarios/schema.json"

func TestSchemaFileUpToDate(t *testing.T) {
	got, err := Schema(nil)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(schemaFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale; run go test ./lab/scenario -run TestSchemaFileUpToDate -update (-file +generated):\n%s", schemaFile, diff)
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaFile, err)
	}
	return s
}

func validateYAML(t *testing.T, s *jsonschema.Schema, data []byte) error {
	t.Helper()
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("YAML to JSON: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(inst)
}

func TestSchemaAcceptsScenarios(t *testing.T) {
	s := compileSchema(t)
	files, err := filepath.Glob("../../scenarios/*/" + FileName)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("testdata", "valid", "minimal", FileName))
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateYAML(t, s, data); err != nil {
			t.Errorf("%s: the schema rejects a valid scenario: %v", f, err)
		}
	}
}

// The broken scenarios whose problems are in the file itself: the schema
// rejects each. (The other broken cases are about other files: manifests
// that are missing or do not decode, ids repeated across directories, or
// YAML that does not parse, which no JSON Schema can see.)
func TestSchemaRejectsBroken(t *testing.T) {
	s := compileSchema(t)
	for _, name := range []string{"unknown-field", "bad-weight", "bad-fault", "bad-check", "bad-top"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "broken", name, name, FileName))
			if err != nil {
				t.Fatal(err)
			}
			if err := validateYAML(t, s, data); err == nil {
				t.Error("the schema accepts a broken scenario")
			}
		})
	}
}

// Each mutation of the minimal scenario breaks one rule. The validator and
// the schema must both reject it, so they agree on the rules the schema can
// express.
func TestSchemaAndValidatorAgree(t *testing.T) {
	s := compileSchema(t)
	base, err := os.ReadFile(filepath.Join("testdata", "valid", "minimal", FileName))
	if err != nil {
		t.Fatal(err)
	}
	app, err := os.ReadFile(filepath.Join("testdata", "valid", "minimal", "app.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"unknown top-level field", "title:", "titel:", "titel: unknown field"},
		{"id not a DNS label", "id: minimal", "id: Minimal_1", `id: "Minimal_1" must be a DNS label`},
		{"zero minutes", "estimatedMinutes: 5", "estimatedMinutes: 0", "estimatedMinutes: must be at least 1"},
		{"no nodes", "  nodes: 2\n", "  proxyMode: iptables\n", "cluster.nodes: is required"},
		{"bad proxy mode", "  nodes: 2\n", "  nodes: 2\n  proxyMode: ipvs\n", "cluster.proxyMode"},
		{"no manifests", "    - app.yaml\n", "", "setup.manifests: is required"},
		{"manifest path escapes", "    - app.yaml\n", "    - app.yaml\n    - ../x.yaml\n", "setup.manifests[1]"},
		{"unknown fault", "name: scale-to-zero", "name: scale-to-one", `unknown fault "scale-to-one"`},
		{"missing fault parameter", "      deployment: web\n", "      namespace: default\n", "faults[0].params.deployment: is required"},
		{"unknown fault parameter", "      deployment: web\n", "      deployment: web\n      replicas: 0\n", "faults[0].params.replicas: unknown parameter"},
		{"fault parameter of the wrong type", "      deployment: web\n", "      deployment: 7\n", "faults[0].params.deployment: must be the name"},
		{"blank task", "task: |\n  Make the Service `web` answer again.\n", "task: ' '\n", "task: must not be empty"},
		{"no hints", "hints:\n  - Look at the Deployment's replicas.\n", "hints: []\n", "hints: must not be empty"},
		{"blank hint", "  - Look at the Deployment's replicas.\n", "  - ''\n", "hints[0]: must not be empty"},
		{"negative weight", "weight: 1", "weight: -2", "checks[0].weight: must be a positive number"},
		{"zero weight", "weight: 1", "weight: 0", "checks[0].weight: must be a positive number"},
		{"check of no kind", "    probe:\n", "    probeX:\n", "checks[0].probeX: unknown field"},
		{"check of two kinds", "    probe:\n", "    rightFix: {object: {kind: Service, name: web}, rule: exists}\n    probe:\n", "checks[0]: set exactly one of"},
		{"probe from two places", "        node: worker\n", "        node: worker\n        pod: client\n", "checks[0].probe.from: set exactly one"},
		{"bad protocol", "protocol: tcp", "protocol: icmp", "checks[0].probe.protocol"},
		{"bad port", "        port: 80\n", "        port: 70000\n", "checks[0].probe.target.port: must be at most 65535"},
		{"bad outcome", "outcome: success", "outcome: works", "checks[0].probe.expect.outcome"},
		{"ratio above 1", "outcome: success\n", "outcome: success\n        ratio: 2\n", "checks[0].probe.expect.ratio: must be at most 1"},
		{"bad timeout", "      protocol: tcp\n", "      protocol: tcp\n      timeout: soon\n", "checks[0].probe.timeout"},
		{"no solution", "solution:\n  - kubectl scale deployment web --replicas=1\n", "solution: []\n", "solution: must not be empty"},
		{"no explanation", "explanation: |\n  Zero replicas leave the EndpointSlice empty, so the Service rejects.\n", "", "explanation: is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(base, []byte(tc.old)) {
				t.Fatalf("the minimal scenario has no %q", tc.old)
			}
			mutated := bytes.Replace(base, []byte(tc.old), []byte(tc.new), 1)
			dir := filepath.Join(t.TempDir(), "minimal")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, data := range map[string][]byte{FileName: mutated, "app.yaml": app} {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, problems := Load(Options{}, DirSource(dir))
			if !strings.Contains(problems.Error(), tc.want) {
				t.Errorf("validator: want a problem with %q, got:\n%v", tc.want, problems.Error())
			}
			if err := validateYAML(t, s, mutated); err == nil {
				t.Error("schema: accepts the mutated scenario")
			}
		})
	}
}
