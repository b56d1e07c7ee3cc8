package scenario

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files (testdata/broken/*.golden and scenarios/schema.json)")

// brokenCases are the broken scenario trees under testdata/broken, each
// loaded from its roots and compared with CASE.golden.
var brokenCases = []struct {
	name  string
	roots []string // under testdata/broken/NAME; none means the case directory itself
}{
	{name: "malformed-yaml"},
	{name: "unknown-field"},
	{name: "bad-weight"},
	{name: "missing-manifest"},
	{name: "duplicate-id", roots: []string{"one", "two"}},
	{name: "bad-fault"},
	{name: "bad-check"},
	{name: "bad-top"},
	{name: "bad-solutions"},
	{name: "either-mode"},
}

func brokenSources(t *testing.T, name string, roots []string) []Source {
	t.Helper()
	dir := filepath.Join("testdata", "broken", name)
	if len(roots) == 0 {
		return []Source{DirSource(dir)}
	}
	var out []Source
	for _, r := range roots {
		out = append(out, DirSource(filepath.Join(dir, r)))
	}
	return out
}

func TestLoadBrokenGolden(t *testing.T) {
	for _, tc := range brokenCases {
		t.Run(tc.name, func(t *testing.T) {
			cat, problems := Load(Options{}, brokenSources(t, tc.name, tc.roots)...)
			if len(problems) == 0 {
				t.Fatal("no problems found in a broken scenario")
			}
			got := problems.Error() + "\n"
			golden := filepath.Join("testdata", "broken", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("problems differ from %s (-want +got):\n%s", golden, diff)
			}
			for _, s := range cat.Scenarios {
				for _, p := range problems {
					if strings.HasPrefix(p.File, s.Dir+"/") {
						t.Errorf("scenario %s is in the catalog despite problem %s", s.ID, p)
					}
				}
			}
		})
	}
}

func TestLoadValid(t *testing.T) {
	cat, problems := Load(Options{}, DirSource("testdata/valid"))
	if err := problems.Err(); err != nil {
		t.Fatalf("problems in a valid scenario:\n%v", err)
	}
	s := cat.Get("minimal")
	if s == nil {
		t.Fatalf("catalog %v has no minimal", cat.IDs())
	}
	if got, want := s.File(), "testdata/valid/minimal/scenario.yaml"; got != want {
		t.Errorf("File() = %q, want %q", got, want)
	}
	if s.Cluster.Mode() != ProxyModeNFTables {
		t.Errorf("default proxy mode = %q, want nftables", s.Cluster.Mode())
	}
	if got := s.Cluster.NodeNames(); !cmp.Equal(got, []string{"control-plane", "worker"}) {
		t.Errorf("NodeNames() = %v", got)
	}
	if len(s.Faults) != 1 || s.Faults[0].Name != "scale-to-zero" || s.Faults[0].Params.String("deployment", "") != "web" {
		t.Errorf("faults = %+v", s.Faults)
	}
	c := s.Checks[0]
	if c.Kind() != CheckProbe || c.Probe.Target.Service != "web" || c.Probe.Target.Port != 80 || c.Probe.Expect.Outcome != OutcomeSuccess {
		t.Errorf("check = %+v, probe %+v", c, c.Probe)
	}
	if len(s.Manifests) != 1 || len(s.Manifests[0].Objects) != 2 {
		t.Fatalf("manifests = %+v", s.Manifests)
	}
	svc := s.Manifests[0].Objects[1]
	if svc.GVK.Kind != "Service" || svc.Name != "web" || svc.Namespace != "default" || svc.Line != 17 {
		t.Errorf("second object = %s %s/%s at line %d", svc.GVK.Kind, svc.Namespace, svc.Name, svc.Line)
	}
}

func TestLoadSingleScenarioDirectory(t *testing.T) {
	cat, problems := Load(Options{}, DirSource("testdata/valid/minimal"))
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	if got := cat.IDs(); !cmp.Equal(got, []string{"minimal"}) {
		t.Errorf("ids = %v", got)
	}
}

func TestLoadMissingDirectory(t *testing.T) {
	_, problems := Load(Options{}, DirSource("testdata/no-such-dir"))
	if len(problems) != 1 || problems[0].String() != "testdata/no-such-dir: no such directory" {
		t.Errorf("problems = %v", problems)
	}
}

// A fault library that registers its own kind replaces the declaration,
// and lint follows it.
func TestRegistryOverride(t *testing.T) {
	reg := DefaultFaults()
	reg.Register(strictFault{})
	_, problems := Load(Options{Faults: reg}, DirSource("testdata/valid"))
	if len(problems) != 1 || !strings.Contains(problems[0].String(), "faults[0].params.deployment: not today") {
		t.Errorf("problems = %v", problems)
	}
	if !strings.HasSuffix(problems[0].File, "minimal/scenario.yaml") || problems[0].Line != 14 {
		t.Errorf("problem located at %s:%d, want minimal/scenario.yaml:14", problems[0].File, problems[0].Line)
	}
}

type strictFault struct{}

func (strictFault) Name() string { return "scale-to-zero" }
func (strictFault) Validate(p Params) error {
	return &ParamError{Param: "deployment", Err: errString("not today")}
}

type errString string

func (e errString) Error() string { return string(e) }
