package scenarios_test

import (
	"io/fs"
	"os"
	"slices"
	"testing"

	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

// Every scenario lints clean, both as compiled into svclab and as files
// in the tree, and the two are the same set.
func TestScenariosLintClean(t *testing.T) {
	embedded, problems := scenarios.Load(scenario.Options{})
	if err := problems.Err(); err != nil {
		t.Errorf("built-in scenarios have problems:\n%v", err)
	}
	onDisk, problems := scenario.Load(scenario.Options{}, scenario.Source{FS: os.DirFS("."), Display: "scenarios"})
	if err := problems.Err(); err != nil {
		t.Errorf("scenarios/ has problems:\n%v", err)
	}
	if !slices.Equal(embedded.IDs(), onDisk.IDs()) {
		t.Errorf("built-in scenarios %v differ from scenarios/ %v", embedded.IDs(), onDisk.IDs())
	}
	for _, id := range []string{"selector-typo", "targetport-mismatch", "etp-local-drop"} {
		if embedded.Get(id) == nil {
			t.Errorf("scenario %s is missing", id)
		}
	}
}

// The built-in catalog is shown as such in messages, and knows the
// images its scenarios run.
func TestLoad(t *testing.T) {
	if d := scenarios.Source().Display; d != "scenarios (built in)" {
		t.Errorf("display %q", d)
	}
	cat, problems := scenarios.Load(scenario.Options{})
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	if s := cat.Get("selector-typo"); s == nil || s.Dir != "scenarios (built in)/selector-typo" {
		t.Fatalf("selector-typo: %+v", s)
	}
	images := cat.Images()
	for _, want := range []string{"busybox:1.36", "registry.k8s.io/e2e-test-images/agnhost:2.53"} {
		if !slices.Contains(images, want) {
			t.Errorf("images %q lack %s", images, want)
		}
	}
}

// Every scenario has at least one check that fails as long as the fault is
// in place (an API, probe or dataplane check) and at least one right-fix
// rule, and each manifest it names is compiled in.
func TestScenariosShape(t *testing.T) {
	cat, _ := scenarios.Load(scenario.Options{})
	for _, s := range cat.Scenarios {
		kinds := map[string]int{}
		for _, c := range s.Checks {
			kinds[c.Kind()]++
		}
		if kinds[scenario.CheckProbe] == 0 {
			t.Errorf("%s: no traffic probe: the grader must check what happens to packets", s.ID)
		}
		if kinds[scenario.CheckRightFix] == 0 {
			t.Errorf("%s: no rightFix rule", s.ID)
		}
		if len(s.Faults) == 0 {
			t.Errorf("%s: no fault", s.ID)
		}
		if len(s.WrongFixes) < 3 {
			t.Errorf("%s: %d wrong fixes; every scenario shows at least three plausible wrong fixes that its checks reject", s.ID, len(s.WrongFixes))
		}
		for _, m := range s.Setup.Manifests {
			if _, err := fs.Stat(scenarios.FS, s.ID+"/"+m); err != nil {
				t.Errorf("%s: manifest %s not embedded: %v", s.ID, m, err)
			}
		}
	}
}

func TestSchemaEmbedded(t *testing.T) {
	want, err := scenario.Schema(nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(scenarios.Schema) != string(want) {
		t.Error("the embedded schema.json is not the generated schema; run go test ./lab/scenario -run TestSchemaFileUpToDate -update")
	}
}
