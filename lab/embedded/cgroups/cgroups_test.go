package cgroups

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{DefaultLimits(), ""},
		{Limits{Pids: 10, MemoryBytes: 1 << 30, CPUShares: 1024}, "processes"},
		{Limits{Pids: 1024, MemoryBytes: 1 << 20, CPUShares: 1024}, "memory"},
		{Limits{Pids: 1024, MemoryBytes: 1 << 30, CPUShares: 1}, "CPU shares"},
	} {
		err := tc.l.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.l, err, tc.want)
		}
	}
}

// TestApplyAndRead puts a shell under tight limits: a fork loop is
// refused past the process limit and counted, and the shell's cgroups are
// the ones ProcsFiles names.
func TestApplyAndRead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	rel := "svclab-test/" + strconv.Itoa(os.Getpid())
	l := Limits{Pids: 64, MemoryBytes: 256 << 20, CPUShares: 512}
	if err := Apply(rel, l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(t, rel) })
	// A shell that joins the cgroup (as node commands do), then forks
	// until it cannot.
	sh := exec.Command("/bin/sh", "-c", `for f in "$@"; do echo $$ > "$f"; done; i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; sleep 1`, "sh")
	hs, _ := hierarchies()
	for _, c := range []string{"pids", "memory", "cpu"} {
		if mp, ok := hs[c]; ok && !unified() {
			sh.Args = append(sh.Args, filepath.Join(mp, rel, "cgroup.procs"))
		}
	}
	if unified() {
		sh.Args = append(sh.Args, filepath.Join(Root, rel, "cgroup.procs"))
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	// The loop reaches the limit within a moment on an idle machine and
	// within seconds on a loaded one.
	var u Usage
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if u = Read(rel); u.PidsRefused > 0 && u.Pids >= 60 {
			break
		}
	}
	sh.Process.Kill()
	sh.Wait()
	exec.Command("pkill", "-f", "^sleep 30$").Run()
	if u.PidsMax != 64 || u.Pids > 64 || u.Pids < 60 {
		t.Errorf("pids %d of %d, want the limit reached", u.Pids, u.PidsMax)
	}
	if u.PidsRefused == 0 {
		t.Error("no refused fork counted")
	}
	if u.MemoryLimitBytes != 256<<20 {
		t.Errorf("memory limit %d", u.MemoryLimitBytes)
	}
	files, err := ProcsFiles(os.Getpid())
	if err != nil || len(files) == 0 {
		t.Fatalf("ProcsFiles: %v %v", files, err)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func removeTree(t *testing.T, rel string) {
	hs, _ := hierarchies()
	for _, mp := range hs {
		for d := filepath.Join(mp, rel); strings.HasPrefix(d, mp+"/"); d = filepath.Dir(d) {
			for i := 0; i < 50 && os.Remove(d) != nil && func() bool { _, err := os.Stat(d); return err == nil }(); i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}
