package cgroups

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	// cgroup v1 counts sockets' buffers only under a TCP limit of the
	// lab's.
	if mp, ok := hs["memory"]; ok && !unified() {
		if b, err := os.ReadFile(filepath.Join(mp, rel, "memory.kmem.tcp.limit_in_bytes")); err == nil && strings.TrimSpace(string(b)) != strconv.Itoa(64<<20) {
			t.Errorf("TCP buffer limit %s, want a quarter of the memory limit", b)
		}
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

// TestJoin moves a running shell below a lab's cgroup: it and the
// processes it starts afterwards count against the lab's limits.
func TestJoin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	rel := "svclab-test/" + strconv.Itoa(os.Getpid()) + "-join"
	if err := Apply(rel, Limits{Pids: 64, MemoryBytes: 256 << 20, CPUShares: 512}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(t, rel+"/control-plane") })
	sh := exec.Command("/bin/sh", "-c", `read _; sleep 30 & echo $!; wait`)
	in, _ := sh.StdinPipe()
	out, _ := sh.StdoutPipe()
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	child := 0
	// The shell reaps its child and ends, so that no zombie (which
	// only the machine's init would reap) keeps the cgroups busy.
	t.Cleanup(func() {
		if child > 0 {
			syscall.Kill(child, syscall.SIGKILL)
		} else {
			sh.Process.Kill()
		}
		sh.Wait()
	})
	if err := Join(rel+"/control-plane", sh.Process.Pid); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("go\n"))
	if _, err := fmt.Fscan(out, &child); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{sh.Process.Pid, child} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, ctrl := range []string{"pids", "memory"} {
			found := false
			for _, line := range strings.Split(string(b), "\n") {
				parts := strings.SplitN(line, ":", 3)
				if len(parts) == 3 && (unified() || strings.Contains(","+parts[1]+",", ","+ctrl+",")) && parts[2] == "/"+rel+"/control-plane" {
					found = true
				}
			}
			if !found {
				t.Errorf("process %d is not in %s's %s cgroup:\n%s", pid, rel, ctrl, b)
			}
		}
	}
	if u := Read(rel); u.Pids < 2 {
		t.Errorf("the lab counts %d processes, want the shell and its child", u.Pids)
	}
}

// TestEnter runs the script that moves a command into a lab's cgroups,
// with plain files standing in for cgroup.procs: each gets the PID the
// command then runs as, the command runs with the given oom_score_adj,
// and a file it cannot write stops the command before it runs.
func TestEnter(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	args := Enter(500, []string{a, b}, "sh", "-c", `echo "$$ $1 $(cat /proc/self/oom_score_adj)"`, "x", "arg")
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, rest, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if rest != "arg 500" {
		t.Errorf("the command's arguments and oom_score_adj: %q", out)
	}
	for _, f := range []string{a, b} {
		if got, _ := os.ReadFile(f); strings.TrimSpace(string(got)) != pid {
			t.Errorf("%s holds %q, want the command's PID %s", f, got, pid)
		}
	}
	ran := filepath.Join(dir, "ran")
	args = Enter(0, []string{filepath.Join(dir, "missing", "cgroup.procs")}, "touch", ran)
	err = exec.Command(args[0], args[1:]...).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Errorf("a cgroup it cannot join: %v, want exit 125", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran outside its cgroups")
	}
}
