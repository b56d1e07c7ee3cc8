//go:build linux

package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/cluster"
)

// nodeSessionCaller, set, makes TestNodeSessionCaller the caller of
// TestNodeSession: "STATE-DIR CLUSTER NODE SECRET".
const nodeSessionCaller = "SVCLAB_NODE_SESSION_CALLER"

// nodeProbe runs in a node, as root there, and prints a LEAK line for each
// thing of its caller's it reaches: the caller's terminal (as /dev/tty, or
// any descriptor, found by its device number), TIOCSTI or TIOCSPGRP on any
// descriptor but its own terminal, the key in the caller's session keyring
// (found with keyctl), any descriptor past the standard ones. Behind a
// terminal, its own terminal is its own to use, and has a name in the
// node. Then, named
// MARKER (its command line, for the caller to find it on the host), it
// waits a little. Arguments: the caller's terminal (its filesystem's
// device and its inode, DEV:INO), the
// key's description, the numbers of keyctl(2), TIOCSTI and TIOCSPGRP, the
// mode ("exec" or "terminal") and the marker.
const nodeProbe = `
my ($callers, $secret, $keyctl, $tiocsti, $tiocspgrp, $mode, $marker) = @ARGV;
$| = 1;
# A terminal is the caller's when it is the same file: the same device
# numbers may name terminals of two devpts instances.
sub callers { my @st = stat($_[0]); return @st && "$st[0]:$st[1]" eq $callers }
sub leak { print "REPORT LEAK ($mode): @_\n" }
open(my $st, "<", "/proc/self/stat") or die "stat: $!";
my $s = <$st>;
close $st;
$s =~ s/^.*\)\s+//s;
my @f = split / /, $s;
my $ctty = $f[4];
if (open(my $t, "+<", "/dev/tty")) {
	# /dev/tty's own file is what fstat sees: the controlling terminal is
	# known by its numbers (tty_nr), which are those of the terminal on
	# descriptor 0 when that is its own.
	my @in = stat("/proc/self/fd/0");
	if ($mode eq "exec") { leak("/dev/tty opens: the command has a controlling terminal") }
	elsif (@in && $in[6] == $ctty && !callers("/proc/self/fd/0")) { print "REPORT ($mode) /dev/tty is a terminal of its own\n" }
	else { leak("/dev/tty is not the terminal made for the command") }
	close $t;
	# The node's programs find their terminal by name (ttyname).
	my $name = readlink("/proc/self/fd/0");
	print "REPORT ($mode) its terminal is $name in the node\n" if -c $name && (stat($name))[6] == $ctty;
}
my ($type, $desc) = ("user", "$secret");
my $id = syscall($keyctl, 10, -3, $type, $desc, 0);
leak("the caller's key $id is in the session keyring") if $id > 0;
my @keep;
opendir(my $d, "/proc/self/fd") or die "fd: $!";
for my $fd (sort { $a <=> $b } grep { /^\d+$/ } readdir $d) {
	my $target = readlink("/proc/self/fd/$fd");
	next unless defined $target;
	next if $target =~ m{^/proc/\d+/fd$};
	print "REPORT ($mode) fd $fd\n";
	my $r = (stat("/proc/self/fd/$fd"))[6];
	leak("descriptor $fd is the caller's terminal") if callers("/proc/self/fd/$fd");
	leak("descriptor $fd ($target) is open") if $fd > 2;
	next if $mode eq "terminal" && -c "/proc/self/fd/$fd" && $r == $ctty;
	my $h;
	open($h, "+<&=", $fd) or open($h, "<&=", $fd) or open($h, ">&=", $fd) or next;
	push @keep, $h;
	my ($c, $pgrp) = ("x", pack("i", getpgrp()));
	leak("TIOCSTI on descriptor $fd pushed input into a terminal") if ioctl($h, $tiocsti, $c);
	leak("TIOCSPGRP on descriptor $fd took a terminal's foreground") if ioctl($h, $tiocspgrp, $pgrp);
}
$0 = $marker;
select(undef, undef, undef, 1.5);
print "REPORT ($mode) done\n";
`

// TestNodeSession runs node commands as 'svclab node exec' and 'svclab
// node shell' do, from a caller (a process of its own) that has a terminal
// of the test's as its controlling terminal and standard streams, a key in
// its session keyring and a copy of its terminal's descriptor that is not
// close-on-exec; a probe in the node reports what of the caller's it
// reaches (nodeProbe), and the caller checks, on the host, that the
// probe's session is not its own. One cluster, a control plane alone.
func TestNodeSession(t *testing.T) {
	requireLab(t)
	if os.Getenv(nodeSessionCaller) != "" {
		t.Skip("the caller of TestNodeSession")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := newTestProvider(t)
	name := uniqueName("sess")
	c, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), name) })

	// The caller's pipes are relayed, never handed to the node: what a
	// command leaves running there cannot write into them once svclab
	// is done with it.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	err = c.NodeExec(ctx, name+"-control-plane", []string{"sh", "-c", "(sleep 3; echo late) & echo now"}, cluster.Stdio{Stdout: pw, Stderr: pw})
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	pr.SetReadDeadline(time.Now().Add(2 * time.Second))
	piped, rerr := io.ReadAll(pr)
	pr.Close()
	if string(piped) != "now\n" || rerr != nil {
		t.Errorf("the caller's pipe got %q (%v) from a command that left a process behind; want only \"now\" and its end", piped, rerr)
	}

	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	secret := uniqueName("svclab-caller-secret")
	caller := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNodeSessionCaller$", "-test.count=1", "-test.v")
	caller.Env = append(os.Environ(), nodeSessionCaller+"="+strings.Join([]string{p.StateDir, name, name + "-control-plane", secret}, " "))
	caller.Stdin, caller.Stdout, caller.Stderr = s, s, s
	caller.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	// The caller's session keyring holds the key: a thread of its own
	// joins a new one, adds the key and forks the caller, and is never
	// used again.
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
	out, _ := io.ReadAll(m) // until every holder of the terminal is gone
	if err := caller.Wait(); err != nil {
		t.Errorf("the caller: %v", err)
	}
	report := string(out)
	t.Logf("the caller's terminal:\n%s", report)
	for _, want := range []string{
		"REPORT caller has the key",
		"REPORT (exec) done", "REPORT (exec) host session ",
		"REPORT (terminal) /dev/tty is a terminal of its own", "REPORT (terminal) its terminal is /dev/pts/", "REPORT (terminal) done", "REPORT (terminal) host session ",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, l := range strings.Split(report, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "REPORT LEAK") {
			t.Error(l)
		}
	}
}

// TestNodeSessionCaller is TestNodeSession's caller: it runs nodeProbe on
// the node with its own standard streams (NodeExec, as 'svclab node exec')
// and behind a terminal (NodeTerminal, as 'svclab node shell'), and finds
// the probe on the host to report its session.
func TestNodeSessionCaller(t *testing.T) {
	spec := strings.Fields(os.Getenv(nodeSessionCaller))
	if len(spec) != 4 {
		t.Skip("run by TestNodeSession")
	}
	dir, name, node, secret := spec[0], spec[1], spec[2], spec[3]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", secret, 0); err != nil {
		t.Fatalf("the caller's session keyring lacks the key: %v", err)
	}
	fmt.Println("REPORT caller has the key")
	c, err := New(dir, nil).Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the terminal that is not close-on-exec, as a terminal
	// emulator or a shell's 3</dev/tty leaves one.
	if _, err := unix.Dup(0); err != nil {
		t.Fatal(err)
	}
	var tty unix.Stat_t
	if err := unix.Fstat(0, &tty); err != nil {
		t.Fatal(err)
	}
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	// probe is the probe's command line for mode, and a function that
	// reports the probe's session on the host once it has ended.
	probe := func(mode string) ([]string, func()) {
		marker := "svclab-probe-" + mode + "-" + secret
		ended := make(chan struct{})
		found := make(chan string, 1)
		go func() {
			for {
				if s, ok := sessionOfCommand(marker); ok {
					found <- s
					return
				}
				select {
				case <-ended:
					found <- ""
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		argv := []string{"perl", "-e", nodeProbe, fmt.Sprintf("%d:%d", tty.Dev, tty.Ino), secret,
			strconv.Itoa(unix.SYS_KEYCTL), strconv.Itoa(unix.TIOCSTI), strconv.Itoa(unix.TIOCSPGRP), mode, marker}
		return argv, func() {
			close(ended)
			switch s := <-found; s {
			case "":
				fmt.Printf("REPORT (%s) the probe was not found on the host\n", mode)
			case strconv.Itoa(sid):
				fmt.Printf("REPORT LEAK (%s): the probe runs in the caller's session %d\n", mode, sid)
			default:
				fmt.Printf("REPORT (%s) host session %s, the caller's %d\n", mode, s, sid)
			}
		}
	}
	argv, report := probe("exec")
	if err := c.NodeExec(ctx, node, argv, cluster.Stdio{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}); err != nil {
		t.Errorf("the probe: %v", errors.Unwrap(err))
	}
	report()
	tc, ok := c.(cluster.NodeTerminaler)
	if !ok {
		t.Fatal("the embedded cluster opens no terminals")
	}
	argv, report = probe("terminal")
	term, err := tc.NodeTerminal(ctx, node, argv, cluster.TerminalSize{Rows: 24, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(os.Stdout, term)
	if err := term.Wait(); err != nil {
		t.Errorf("the probe behind a terminal: %v", err)
	}
	term.Close()
	report()
}

// sessionOfCommand finds a process whose command line starts with marker
// and returns its session, as this process's PID namespace numbers it.
func sessionOfCommand(marker string) (string, bool) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.HasPrefix(cmdline, []byte(marker)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 3 {
			return f[3], true
		}
	}
	return "", false
}

// BenchmarkNodeExec measures a node command (true) from the call to its
// end: the live views run one on every node of a lab every second.
func BenchmarkNodeExec(b *testing.B) {
	requireLab(b)
	ctx := context.Background()
	p := newTestProvider(b)
	name := uniqueName("bench")
	c, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 0})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Delete(context.Background(), name) })
	node := name + "-control-plane"
	for b.Loop() {
		if err := c.NodeExec(ctx, node, []string{"true"}, cluster.Stdio{}); err != nil {
			b.Fatal(err)
		}
	}
}
