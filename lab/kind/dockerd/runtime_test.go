package dockerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRuntimeFiles(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		config, procs string
	}{
		{args: strings.Fields("--root /run/runc --log /run/x/log.json --log-format json create --bundle /b/c1 --pid-file /b/pid c1"), config: "/b/c1/config.json"},
		{args: strings.Fields("--root /r run -b /b/c2 c2"), config: "/b/c2/config.json"},
		{args: strings.Fields("--root /r create --bundle=/b/c3 c3"), config: "/b/c3/config.json"},
		{args: strings.Fields("--root /r --log /l exec --process /tmp/p.json --detach c1"), procs: "/tmp/p.json"},
		{args: strings.Fields("--root /r exec -p /tmp/q.json c1"), procs: "/tmp/q.json"},
		{args: strings.Fields("--root /r start c1")},
		{args: strings.Fields("--root /r delete --force c1")},
		{args: strings.Fields("--version")},
	} {
		config, procs := runtimeFiles(tc.args)
		if config != tc.config || procs != tc.procs {
			t.Errorf("%q: got %q %q, want %q %q", tc.args, config, procs, tc.config, tc.procs)
		}
	}
}

func TestMissing(t *testing.T) {
	if got := Missing(0x000001fffeffffff, 40); strings.Join(got, ",") != "CAP_SYS_RESOURCE" {
		t.Errorf("this machine's set: %v", got)
	}
	if got := Missing(1<<41-1, 40); len(got) != 0 {
		t.Errorf("a full set: %v", got)
	}
	if got := Missing(1<<41-1, 41); strings.Join(got, ",") != "CAP_41" {
		t.Errorf("a newer kernel's capability: %v", got)
	}
}

func TestBounding(t *testing.T) {
	p := filepath.Join(t.TempDir(), "status")
	os.WriteFile(p, []byte("Name:\tx\nCapPrm:\t0000000000000000\nCapBnd:\t000001fffeffffff\n"), 0o600)
	b, err := boundingOf(p)
	if err != nil || b != 0x000001fffeffffff {
		t.Errorf("got %x, %v", b, err)
	}
}

// The filter drops the capabilities from every set of a config.json's
// process (or of a process.json), keeping the rest of the file — large
// numbers included — as it was.
func TestFilterFile(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config.json")
	os.WriteFile(config, []byte(`{"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"rlimits":[{"type":"RLIMIT_NOFILE","hard":1048576,"soft":1048576}],`+
		`"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_SYS_ADMIN"],"effective":["CAP_SYS_RESOURCE"],"permitted":["CAP_CHOWN","CAP_SYS_RESOURCE"]}},`+
		`"linux":{"resources":{"memory":{"limit":9223372036854771712}}}}`), 0o644)
	if err := filterFile(config, true, []string{"CAP_SYS_RESOURCE"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(config)
	s := string(data)
	for _, want := range []string{`"bounding":["CAP_CHOWN","CAP_SYS_ADMIN"]`, `"effective":[]`, `"permitted":["CAP_CHOWN"]`, `9223372036854771712`, `"hard":1048576`} {
		if !strings.Contains(s, want) {
			t.Errorf("%s missing from\n%s", want, s)
		}
	}
	if strings.Contains(s, "CAP_SYS_RESOURCE") {
		t.Errorf("CAP_SYS_RESOURCE kept:\n%s", s)
	}

	procs := filepath.Join(dir, "process.json")
	os.WriteFile(procs, []byte(`{"args":["sh"],"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_KILL"]}}`), 0o644)
	if err := filterFile(procs, false, []string{"CAP_SYS_RESOURCE"}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(procs)
	if string(data) != `{"args":["sh"],"capabilities":{"bounding":["CAP_KILL"]}}` {
		t.Errorf("process.json: %s", data)
	}
}
