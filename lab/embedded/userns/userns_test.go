//go:build linux

package userns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestAllocator(t *testing.T) {
	a := Allocator{Dir: t.TempDir(), First: 1 << 30, Size: LabSize, Count: 4}
	// Concurrent allocations never share a range.
	var mu sync.Mutex
	seen := map[uint32]string{}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := a.Allocate(fmt.Sprintf("/labs/%d", i), nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if o, dup := seen[c.Range.Base]; dup {
				t.Errorf("range %d handed to %s and %s", c.Range.Base, o, c.Owner)
			}
			seen[c.Range.Base] = c.Owner
		}()
	}
	wg.Wait()
	if len(seen) != 4 {
		t.Fatalf("%d ranges allocated, want 4", len(seen))
	}
	if _, err := a.Allocate("/labs/5", nil); err == nil || !strings.Contains(err.Error(), "all 4 id ranges") {
		t.Fatalf("a fifth allocation: %v", err)
	}
	claims, err := a.Claims()
	if err != nil || len(claims) != 4 {
		t.Fatalf("claims %v, %v", claims, err)
	}
	// A stale claim is taken back; the others stay.
	c, err := a.Allocate("/labs/5", func(c Claim) bool { return c.Owner == "/labs/2" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Range.Base != seenBase(seen, "/labs/2") || c.Range.Size != LabSize {
		t.Errorf("the stale range was not reused: %+v", c)
	}
	// Release only frees a claim that is still the caller's.
	old := c
	old.Token = "someone-else"
	if err := a.Release(old); err != nil {
		t.Fatal(err)
	}
	if claims, _ := a.Claims(); len(claims) != 4 {
		t.Errorf("a release with another token freed a claim: %d left", len(claims))
	}
	if err := a.Release(c); err != nil {
		t.Fatal(err)
	}
	if claims, _ := a.Claims(); len(claims) != 3 {
		t.Errorf("%d claims after a release, want 3", len(claims))
	}
	// A damaged claim is never handed out again.
	os.WriteFile(a.path(c.Index), []byte("{"), 0o600)
	if _, err := a.Allocate("/labs/6", nil); err == nil {
		t.Error("a damaged claim's range was handed out")
	}
	if err := a.ReleaseStale(func(Claim) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if claims, _ := a.Claims(); len(claims) != 0 {
		t.Errorf("ReleaseStale left %d claims", len(claims))
	}
}

func seenBase(seen map[uint32]string, owner string) uint32 {
	for b, o := range seen {
		if o == owner {
			return b
		}
	}
	return 0
}

func TestRange(t *testing.T) {
	r := Range{Base: 1 << 30, Size: LabSize}
	if id, ok := r.HostID(5); !ok || id != 1<<30+5 {
		t.Errorf("HostID(5) = %d, %v", id, ok)
	}
	if _, ok := r.HostID(LabSize); ok {
		t.Error("an id past the range is mapped")
	}
	sub, err := r.Sub(3, PodSize)
	if err != nil || sub.Base != 1<<30+3*PodSize || sub.Size != PodSize {
		t.Errorf("Sub(3) = %+v, %v", sub, err)
	}
	if _, err := r.Sub(16, PodSize); err == nil {
		t.Error("a block past the range was given")
	}
	if r.String() != fmt.Sprintf("0 %d %d", 1<<30, LabSize) {
		t.Errorf("String() = %q", r.String())
	}
}

// root skips tests that need root and the tools the lab uses.
func root(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, c := range []string{"nsenter", "unshare", "nft", "ip"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("needs %s", c)
		}
	}
}

// searchableTempDir is a temporary directory that the lab's ids may
// search, as a lab's state directory is.
func searchableTempDir(t *testing.T) string {
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	return dir
}

// testRange is a range far from the pool's, so the test never meets a lab.
var testRange = Range{Base: 3 << 30, Size: LabSize}

func TestNamespaces(t *testing.T) {
	root(t)
	ctx := context.Background()
	dir := searchableTempDir(t)
	pin := filepath.Join(dir, "userns")
	if err := Create(pin, testRange); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Remove(pin) })
	// The lab's first id owns its namespace, so the kernel charges the
	// lab's namespaces and inotify instances to it, not to root.
	if uid, err := OwnerUID(pin); err != nil || uid != testRange.Base {
		t.Errorf("the lab's user namespace is owned by uid %d (%v), want %d", uid, err, testRange.Base)
	}
	b, err := exec.Command("nsenter", "--user="+pin, "cat", "/proc/self/uid_map").Output()
	if err != nil || strings.Join(strings.Fields(string(b)), " ") != testRange.String() {
		t.Fatalf("uid_map inside = %q, %v", b, err)
	}
	name := fmt.Sprintf("svclab-usernstest-%d", os.Getpid())
	if err := NewNetns(ctx, pin, name); err != nil {
		t.Fatal(err)
	}
	netns := filepath.Join(NetnsDir, name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	owner, err := Owner(netns)
	labIno, _ := Inode(pin)
	if err != nil || owner != labIno {
		t.Fatalf("the network namespace's owner is %d (%v), want the lab's %d", owner, err, labIno)
	}
	if err := NewNetns(ctx, pin, name); err == nil {
		t.Error("a second namespace of the same name was made")
	}
	// Root in the lab has the network namespace's full power...
	inLab := func(args ...string) (string, error) {
		out, err := exec.Command("nsenter", append([]string{"--user=" + pin, "--net=" + netns, "--"}, args...)...).CombinedOutput()
		return string(out), err
	}
	for _, c := range [][]string{
		{"nft", "add", "table", "ip", "t"},
		{"nft", "list", "ruleset"},
		{"ip", "link", "set", "lo", "up"},
		{"sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"},
	} {
		if out, err := inLab(c...); err != nil {
			t.Errorf("%v in the lab: %v: %s", c, err, out)
		}
	}
	// ...and none over the host's.
	before, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	if out, err := inLab("sh", "-c", "echo '|/tmp/x' > /proc/sys/kernel/core_pattern"); err == nil {
		t.Errorf("root in the lab wrote the host's core_pattern: %s", out)
	}
	if after, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); string(after) != string(before) {
		t.Fatalf("core_pattern changed: %q", after)
	}
	if out, err := inLab("sh", "-c", "echo 1 > /proc/sys/net/netfilter/nf_conntrack_max"); err == nil {
		t.Errorf("root in the lab wrote the host-only nf_conntrack_max: %s", out)
	}
	// A directory the lab owns, so only the kernel's device rule stops it.
	own := filepath.Join(dir, "own")
	os.Mkdir(own, 0o755)
	os.Chown(own, int(testRange.Base), int(testRange.Base))
	if out, err := inLab("touch", own+"/ok"); err != nil {
		t.Errorf("root in the lab cannot write its own directory: %v: %s", err, out)
	}
	if out, err := inLab("mknod", own+"/sda", "b", "8", "0"); err == nil {
		t.Errorf("root in the lab made a block device: %s", out)
	}

	// A nested namespace maps ids of the lab's, and is a member.
	child := filepath.Join(dir, "child")
	sub, _ := testRange.Sub(1, PodSize)
	if err := NewChild(ctx, pin, child, Range{Base: sub.Base - testRange.Base, Size: PodSize}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Remove(child) })
	b, err = exec.Command("nsenter", "--user="+child, "cat", "/proc/self/uid_map").Output()
	if err != nil || strings.Join(strings.Fields(string(b)), " ") != fmt.Sprintf("0 %d %d", PodSize, PodSize) {
		t.Fatalf("the nested uid_map = %q, %v", b, err)
	}
	sleeper := exec.Command("nsenter", "--user="+child, "--", "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	time.Sleep(100 * time.Millisecond)
	members := Members(pin)
	found := false
	for _, p := range members {
		if p == sleeper.Process.Pid {
			found = true
		}
		if p == os.Getpid() {
			t.Error("the host's own process counted as a lab member")
		}
	}
	if !found {
		t.Errorf("a process in a nested namespace is not among the lab's members %v", members)
	}
}

func TestIDMapMount(t *testing.T) {
	root(t)
	dir := searchableTempDir(t)
	pin := filepath.Join(dir, "userns")
	if err := Create(pin, testRange); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Remove(pin) })
	layer := filepath.Join(dir, "layer")
	os.MkdirAll(filepath.Join(layer, "etc"), 0o755)
	os.WriteFile(filepath.Join(layer, "etc", "file"), []byte("x"), 0o644)
	os.Chown(filepath.Join(layer, "etc", "file"), 33, 33)
	mapped := filepath.Join(dir, "mapped")
	if err := IDMapMount(pin, layer, mapped); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mapped, unix.MNT_DETACH) })
	if !IsMountPoint(mapped) || IsMountPoint(layer) {
		t.Errorf("IsMountPoint: mapped %v, layer %v", IsMountPoint(mapped), IsMountPoint(layer))
	}
	for path, want := range map[string]uint32{"etc": testRange.Base, "etc/file": testRange.Base + 33} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(mapped, path), &st); err != nil || st.Uid != want || st.Gid != want {
			t.Errorf("%s is owned by %d:%d (%v), want %d", path, st.Uid, st.Gid, err, want)
		}
	}
	if err := os.WriteFile(filepath.Join(mapped, "etc", "file"), []byte("y"), 0o644); err == nil {
		t.Error("the idmapped layer is writable")
	}
	// An overlay over it copies up with the lab's ids.
	upper, work, root := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "root")
	for _, d := range []string{upper, work, root} {
		os.MkdirAll(d, 0o755)
	}
	if err := unix.Mount("overlay", root, "overlay", 0, "lowerdir="+mapped+",upperdir="+upper+",workdir="+work); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(root, "etc", "file"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(upper, "etc", "file"), &st); err != nil || st.Uid != testRange.Base+33 {
		t.Errorf("the copied-up file is owned by %d (%v), want %d", st.Uid, err, testRange.Base+33)
	}
	if b, _ := os.ReadFile(filepath.Join(layer, "etc", "file")); string(b) != "x" {
		t.Errorf("the shared layer changed: %q", b)
	}
}
