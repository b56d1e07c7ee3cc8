//go:build linux

package nodeagent

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/cgroups"
)

// A node command is entered with nsenter from the node container's first
// process, with the container's environment; a container whose process
// has ended (or whose PID now names another process) is refused.
func TestNodeContainerCommand(t *testing.T) {
	start, err := processStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, state string
		wantErr     string
	}{
		{"running", fmt.Sprintf(`{"id":"node-lab-worker","init_process_pid":%d,"init_process_start":%d}`, os.Getpid(), start), ""},
		{"pid recycled", fmt.Sprintf(`{"id":"node-lab-worker","init_process_pid":%d,"init_process_start":%d}`, os.Getpid(), start+1), "has ended"},
		{"no state", "", "not running"},
		{"garbage", "{", "reading the state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			nc := NodeContainer{RuncRoot: filepath.Join(dir, "runc"), Bundle: filepath.Join(dir, "bundle"), ID: "node-lab-worker"}
			for _, d := range []string{filepath.Join(nc.RuncRoot, nc.ID), nc.Bundle} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if tc.state != "" {
				if err := os.WriteFile(filepath.Join(nc.RuncRoot, nc.ID, "state.json"), []byte(tc.state), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			spec := `{"process":{"env":["PATH=/usr/sbin:/usr/bin:/sbin:/bin","HOME=/root"],"cwd":"/root"}}`
			if err := os.WriteFile(filepath.Join(nc.Bundle, "config.json"), []byte(spec), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd, err := nc.Command(context.Background(), []string{"nft", "list", "ruleset"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			procs, err := cgroups.ProcsFiles(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			adj, _ := os.ReadFile("/proc/self/oom_score_adj")
			score, _ := strconv.Atoi(strings.TrimSpace(string(adj)))
			want := cgroups.Enter(score, procs,
				"nsenter", "--target", fmt.Sprint(os.Getpid()), "--user", "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd", "--", "nft", "list", "ruleset")
			if !slices.Equal(cmd.Args(), want) {
				t.Errorf("args %q, want %q", cmd.Args(), want)
			}
			if !slices.Equal(cmd.Env(), []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}) {
				t.Errorf("env %q", cmd.Env())
			}
		})
	}
}

// helperRole tells the test binary, run again by
// TestNodeCommandKeepsTheCallerOut, which part it plays: "caller" (the
// person who runs svclab: a terminal, a session keyring) or "inside" (the
// node command, reporting what of the caller's it reaches).
const helperRole = "SVCLAB_NODECOMMAND_HELPER"

// A node command gets nothing of its caller's, run with its caller's
// streams (as `svclab node exec` does) or behind a terminal of its own
// (`svclab node shell`): the caller, a process of its own, has a terminal
// of the test's as its controlling terminal and standard streams, a key in
// its session keyring, and a descriptor of the terminal that is not
// close-on-exec (as a terminal emulator or a shell's 3</dev/tty leaves
// one); the command reports each of them it reaches, and its session. The
// namespaces a real node command enters are left out (the command is the
// test binary, on the host): they are lab/embedded's end-to-end test's.
func TestNodeCommandKeepsTheCallerOut(t *testing.T) {
	if os.Getenv(helperRole) != "" {
		t.Skip("a helper process")
	}
	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	secret := fmt.Sprintf("svclab-test-secret-%d", time.Now().UnixNano())
	caller := exec.Command(os.Args[0], "-test.run=^TestHelperNodeCommandCaller$", "-test.count=1")
	caller.Env = append(os.Environ(), helperRole+"=caller", "SVCLAB_TEST_SECRET="+secret)
	caller.Stdin, caller.Stdout, caller.Stderr = s, s, s
	caller.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	// The caller's session keyring, with the secret in it: made by a
	// thread of its own, which forks the caller and is never used again.
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if _, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 {
			errc <- fmt.Errorf("joining a session keyring: %w", errno)
			return
		}
		if _, err := unix.AddKey("user", secret, []byte("the caller's payload"), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
			errc <- fmt.Errorf("adding the caller's key: %w", err)
			return
		}
		errc <- caller.Start()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	s.Close()
	out, _ := io.ReadAll(m) // EIO once every holder of the terminal is gone
	caller.Wait()
	report := string(out)
	t.Logf("report:\n%s", report)
	for _, want := range []string{"REPORT caller has the key", "REPORT inside (streams) done", "REPORT inside (terminal) done", "REPORT inside (terminal) has a terminal of its own"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, l := range strings.Split(report, "\n") {
		if strings.Contains(l, "LEAK") {
			t.Error(strings.TrimSpace(l))
		}
	}
}

// TestHelperNodeCommandCaller is the caller of
// TestNodeCommandKeepsTheCallerOut.
func TestHelperNodeCommandCaller(t *testing.T) {
	if os.Getenv(helperRole) != "caller" {
		t.Skip("run by TestNodeCommandKeepsTheCallerOut")
	}
	secret := os.Getenv("SVCLAB_TEST_SECRET")
	if _, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", secret, 0); err != nil {
		t.Fatalf("the caller's session keyring lacks the key: %v", err)
	}
	fmt.Println("REPORT caller has the key")
	// A copy of the terminal that is not close-on-exec.
	extra, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.Readlink("/proc/self/fd/0")
	if err != nil {
		t.Fatal(err)
	}
	sid, _ := unix.Getsid(0)
	inside := func(mode string) *NodeCommand {
		c := &NodeCommand{cmd: exec.Command(os.Args[0], "-test.run=^TestHelperNodeCommandInside$", "-test.count=1")}
		c.cmd.Env = append(os.Environ(), helperRole+"=inside", "INSIDE_MODE="+mode, "CALLER_TTY="+tty, fmt.Sprintf("CALLER_SID=%d", sid), fmt.Sprintf("CALLER_EXTRA_FD=%d", extra))
		return c
	}
	if err := inside("streams").Run(os.Stdin, os.Stdout, os.Stderr); err != nil {
		t.Fatal(err)
	}
	term, err := inside("terminal").Terminal(cluster.TerminalSize{Rows: 24, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(os.Stdout, term)
	if err := term.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestHelperNodeCommandInside is the node command of
// TestNodeCommandKeepsTheCallerOut: it prints a LEAK line for each thing of
// the caller's it reaches.
func TestHelperNodeCommandInside(t *testing.T) {
	if os.Getenv(helperRole) != "inside" {
		t.Skip("run by TestNodeCommandKeepsTheCallerOut")
	}
	mode, secret := os.Getenv("INSIDE_MODE"), os.Getenv("SVCLAB_TEST_SECRET")
	leak := func(format string, args ...any) {
		fmt.Printf("REPORT LEAK (%s): %s\n", mode, fmt.Sprintf(format, args...))
	}
	var callerTTY unix.Stat_t
	if err := unix.Stat(os.Getenv("CALLER_TTY"), &callerTTY); err != nil {
		t.Fatal(err)
	}
	isCallers := func(fd int) bool {
		var st unix.Stat_t
		return unix.Fstat(fd, &st) == nil && st.Dev == callerTTY.Dev && st.Ino == callerTTY.Ino
	}
	if sid, _ := unix.Getsid(0); strconv.Itoa(sid) == os.Getenv("CALLER_SID") {
		leak("the command runs in the caller's session %d", sid)
	} else if sid != os.Getpid() {
		leak("the command's session %d is not its own (pid %d)", sid, os.Getpid())
	}
	// The controlling terminal: none, or (behind a terminal) its own.
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	ownTTY := mustAtoi(t, strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))[4])
	if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err == nil {
		// fstat sees /dev/tty's own file: the controlling terminal is
		// known by its numbers, those of the terminal on descriptor 0
		// when that is its own.
		var in unix.Stat_t
		switch {
		case mode == "streams":
			leak("/dev/tty opens (the command has a controlling terminal)")
		case unix.Fstat(0, &in) == nil && int(in.Rdev) == ownTTY && !isCallers(0):
			fmt.Printf("REPORT inside (%s) has a terminal of its own\n", mode)
		default:
			leak("/dev/tty is not the terminal made for the command")
		}
		f.Close()
	}
	if _, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", secret, 0); err == nil {
		leak("the caller's key is in the command's session keyring")
	}
	if keys, _ := os.ReadFile("/proc/keys"); strings.Contains(string(keys), secret) {
		// Root sees every key of root's in /proc/keys; only one it
		// possesses (through its keyrings) is marked so (Q).
		for _, l := range strings.Split(string(keys), "\n") {
			if f := strings.Fields(l); strings.Contains(l, secret) && len(f) > 2 && strings.Contains(f[2], "Q") {
				leak("the command possesses the caller's key (/proc/keys)")
			}
		}
	}
	if _, err := unix.FcntlInt(uintptr(mustAtoi(t, os.Getenv("CALLER_EXTRA_FD"))), unix.F_GETFD, 0); err == nil {
		leak("the caller's descriptor %s is open", os.Getenv("CALLER_EXTRA_FD"))
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fd := mustAtoi(t, e.Name())
		if isCallers(fd) {
			leak("descriptor %d is the caller's terminal", fd)
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && ownTTY != 0 && int(st.Rdev) == ownTTY {
			continue // its own terminal is its own to use
		}
		c := byte(' ')
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c))); errno == 0 {
			leak("TIOCSTI on descriptor %d pushed input into a terminal", fd)
		}
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp()); err == nil {
			leak("TIOCSPGRP on descriptor %d took a terminal's foreground", fd)
		}
	}
	fmt.Printf("REPORT inside (%s) done\n", mode)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// BenchmarkStartIsolated is what starting a node command with a keyring of
// its own and no inherited descriptors costs over a plain start (of
// /bin/true, run to its end).
func BenchmarkStartIsolated(b *testing.B) {
	for _, tc := range []struct {
		name  string
		start func(*exec.Cmd) error
	}{{"plain", (*exec.Cmd).Start}, {"isolated", startIsolated}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				if err := tc.start(cmd); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// openNodePTY makes a terminal in the node's own devpts, and trusts
// nothing of the node's filesystem: a /dev/pts that is not a devpts, one
// reached through a symbolic link, a ptmx that another file is mounted
// over, a process that is no longer the node's, are refused. Each "node"
// is a process in a mount namespace of its own.
func TestOpenNodePTY(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces)")
	}
	for _, tc := range []struct {
		name, setup, wantErr string
	}{
		{"a devpts of its own", "mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts /dev/pts", ""},
		{"not a devpts", "mount -t tmpfs tmpfs /dev/pts && touch /dev/pts/ptmx", "not a devpts"},
		{"a symbolic link", `mount -t tmpfs tmpfs "$DIR" && mkdir "$DIR/dev" && mount --rbind /dev "$DIR/dev" && mount -t tmpfs tmpfs /dev && ln -s "$DIR/dev/pts" /dev/pts`, "/dev/pts"},
		{"a file over ptmx", "mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts && mount --bind /dev/null /dev/pts/ptmx", "/dev/pts/ptmx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", tc.setup+" && echo ready && exec sleep 60")
			node.Env = append(os.Environ(), "DIR="+t.TempDir())
			out, err := node.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			node.Stderr = os.Stderr
			if err := node.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { node.Process.Kill(); node.Wait() }()
			if b, _ := io.ReadAll(io.LimitReader(out, 6)); string(b) != "ready\n" {
				t.Fatalf("the node was not set up: %q", b)
			}
			pid := node.Process.Pid
			start, err := processStart(pid)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := openNodePTY(pid, start+1); err == nil || !strings.Contains(err.Error(), "has ended") {
				t.Errorf("another process under the node's PID: %v", err)
			}
			master, slave, err := openNodePTY(pid, start)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer master.Close()
			defer slave.Close()
			// The slave is a terminal of the node's devpts, not the host's.
			var sst, nodePts, hostPts unix.Stat_t
			if err := unix.Fstat(int(slave.Fd()), &sst); err != nil {
				t.Fatal(err)
			}
			if err := unix.Stat(fmt.Sprintf("/proc/%d/root/dev/pts", pid), &nodePts); err != nil {
				t.Fatal(err)
			}
			unix.Stat("/dev/pts", &hostPts)
			if sst.Dev != nodePts.Dev || sst.Dev == hostPts.Dev {
				t.Errorf("the terminal is on device %d; the node's devpts is %d, the host's %d", sst.Dev, nodePts.Dev, hostPts.Dev)
			}
			if _, err := master.Write([]byte("typed\n")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			if n, err := slave.Read(buf); err != nil || string(buf[:n]) != "typed\n" {
				t.Errorf("the slave read %q, %v", buf[:n], err)
			}
		})
	}
}
