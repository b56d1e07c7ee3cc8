//go:build linux

package embedded

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/cluster"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden file (run go test -update after checking):\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

// fakeRunner records commands; fail maps a command prefix to the error it
// returns, and outputs a command prefix to its output.
type fakeRunner struct {
	cmds    []string
	fail    map[string]error
	outputs map[string]string
}

func (f *fakeRunner) Run(_ context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	line := name + " " + strings.Join(args, " ")
	rec := line
	if stdin != nil {
		rec += " <<EOF\n" + string(stdin) + "EOF"
	}
	f.cmds = append(f.cmds, rec)
	for prefix, err := range f.fail {
		if strings.HasPrefix(line, prefix) {
			return nil, err
		}
	}
	for prefix, out := range f.outputs {
		if strings.HasPrefix(line, prefix) {
			return []byte(out), nil
		}
	}
	return nil, nil
}

func (f *fakeRunner) NewNetns(_ context.Context, userns, name string) error {
	f.cmds = append(f.cmds, "new netns "+name+" owned by "+userns)
	return nil
}

func testState(t *testing.T) *State {
	t.Helper()
	st, err := NewState(cluster.CreateOptions{Name: "lab", Workers: 2, NodeLabels: map[string]map[string]string{
		"lab-worker2": {"topology.kubernetes.io/zone": "zone-b"},
	}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	st.KubeBin = "/cache/svclab-kube"
	return st
}

func TestNewState(t *testing.T) {
	st := testState(t)
	var got []string
	for _, n := range st.Nodes {
		got = append(got, strings.Join([]string{n.Name, string(n.Role), n.IP, n.Netns, n.HostVeth, n.Labels["topology.kubernetes.io/zone"]}, " "))
	}
	want := []string{
		"lab-control-plane control-plane 172.29.3.2 svclab-lab-control-plane svl3-0 ",
		"lab-worker worker 172.29.3.3 svclab-lab-worker svl3-1 ",
		"lab-worker2 worker 172.29.3.4 svclab-lab-worker2 svl3-2 zone-b",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st.Server() != "https://172.29.3.253:6443" || st.Bridge != "svlbr3" || st.Gateway != "172.29.3.1" || st.Subnet != "172.29.3.0/24" {
		t.Errorf("server %s bridge %s gateway %s subnet %s", st.Server(), st.Bridge, st.Gateway, st.Subnet)
	}

	for _, tc := range []struct {
		name    string
		opts    cluster.CreateOptions
		index   int
		wantErr string
	}{
		{"labels for unknown node", cluster.CreateOptions{Name: "lab", Workers: 1, NodeLabels: map[string]map[string]string{"lab-worker2": {"a": "b"}}}, 1, `labels given for node "lab-worker2"`},
		{"negative workers", cluster.CreateOptions{Name: "lab", Workers: -1}, 1, "between 0 and 20"},
		{"index out of range", cluster.CreateOptions{Name: "lab"}, 255, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewState(tc.opts, tc.index)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestFabricUpDown(t *testing.T) {
	st := testState(t)
	r := &fakeRunner{}
	if err := fabricUp(context.Background(), r, st, "/state/clusters/lab/userns"); err != nil {
		t.Fatal(err)
	}
	r.cmds = append(r.cmds, "# down")
	if err := fabricDown(context.Background(), r, st); err != nil {
		t.Fatal(err)
	}
	golden(t, "fabric.txt", strings.Join(r.cmds, "\n")+"\n")
}

func TestFabricDownIgnoresMissing(t *testing.T) {
	st := testState(t)
	r := &fakeRunner{fail: map[string]error{
		"ip netns del":     errors.New(`Cannot remove namespace file "/run/netns/x": No such file or directory`),
		"ip link del":      errors.New(`Cannot find device "svl3-0"`),
		"nft delete table": errors.New("Error: No such file or directory; did you mean table ‘x’?"),
	}}
	if err := fabricDown(context.Background(), r, st); err != nil {
		t.Fatalf("fabricDown on an already removed fabric: %v", err)
	}
	r = &fakeRunner{fail: map[string]error{"ip link del svlbr3": errors.New("Operation not permitted")}}
	if err := fabricDown(context.Background(), r, st); err == nil || !strings.Contains(err.Error(), "Operation not permitted") {
		t.Fatalf("real failures must be reported, got %v", err)
	}
}

func TestCreateBridge(t *testing.T) {
	routes := "default via 192.0.2.1 dev eth0\n192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2\n" +
		"172.29.1.0/24 dev docker7 scope link\nlocal 172.29.2.9 dev lo table local scope host\n" +
		"172.29.5.0/24 dev svlbr5 proto kernel scope link src 172.29.5.1\n"
	r := &fakeRunner{
		outputs: map[string]string{"ip -4 -o route": routes},
		fail:    map[string]error{"ip link add svlbr3": errors.New("RTNETLINK answers: File exists")},
	}
	i, err := createBridge(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	// 1 and 2 overlap host routes, 3 exists already.
	if i != 4 {
		t.Fatalf("index %d, want 4; commands:\n%s", i, strings.Join(r.cmds, "\n"))
	}
	r = &fakeRunner{outputs: map[string]string{"ip -4 -o route": ""}, fail: map[string]error{"ip link add": errors.New("Operation not permitted")}}
	if _, err := createBridge(context.Background(), r); err == nil || !strings.Contains(err.Error(), "Operation not permitted") {
		t.Fatalf("err = %v", err)
	}
}

func TestRoutePrefixes(t *testing.T) {
	got := routePrefixes("default via 1.2.3.4 dev eth0\n10.0.0.0/8 dev x\nbroadcast 10.1.2.255 dev y table local\n172.29.4.0/24 dev svlbr4 scope link\n")
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.2.255/32")}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestLeftovers(t *testing.T) {
	links := "1: lo: <LOOPBACK> mtu 65536\n7: svlbr3@svl3-cp: <BROADCAST> mtu 1500\n8: svl3-0@if2: <BROADCAST> mtu 1500\n9: svlx: <BROADCAST>\n10: eth0: <UP>\n11: svl3-lb@if2: <BROADCAST>\n12: svl3-lbx: <UP>\n13: svl3-cp@svlbr3: <BROADCAST>\n14: svl3-cpx: <UP>\n"
	if got := strings.Join(leftoverLinks(links), ","); got != "svlbr3,svl3-0,svl3-lb,svl3-cp" {
		t.Errorf("links %q", got)
	}
	for _, l := range []string{"svl3-lb", "svl3-cp", "svlbr3"} {
		if linkIndex(l) != 3 {
			t.Errorf("%s is of index %d", l, linkIndex(l))
		}
	}
	for ns, want := range map[string]string{
		"svclab-lab-control-plane": "lab", "svclab-lab-worker2": "lab", "svclab-lab-pod-0a1b": "lab", "svclab-lab-lb": "lab",
		"svclab-my-lb-worker": "my-lb", "svclab-my-lb-lb": "my-lb", "svclab--lb": "", "other-lab-lb": "",
		"svclab-lab-api": "lab", "svclab-my-api-api": "my-api", "svclab--api": "",
		"svclab-lab-fabric": "lab", "svclab-my-fabric-fabric": "my-fabric", "svclab--fabric": "",
	} {
		if got := netnsCluster(ns); got != want {
			t.Errorf("netnsCluster(%q) = %q, want %q", ns, got, want)
		}
	}
	tables := "table inet filter\ntable inet svclab-lab\ntable ip svclab-x\ntable inet svclab-e2e-1\ntable bridge svclab-lab\n"
	if got := strings.Join(leftoverTables(tables, "inet"), ","); got != "svclab-lab,svclab-e2e-1" {
		t.Errorf("inet tables %q", got)
	}
}

// TestOwnPodRoute: the control plane routes the cluster's own nodes'
// shares of the Pod range, at their own addresses, and nothing a learner's
// made-up Node asks for.
func TestOwnPodRoute(t *testing.T) {
	st := testState(t)
	for _, tc := range []struct {
		node, ip, cidr string
		want           bool
	}{
		{"lab-worker", "172.29.3.3", "10.244.1.0/24", true},
		{"lab-control-plane", "172.29.3.2", "10.244.0.0/24", true},
		{"evil", "172.29.3.3", "10.244.9.0/24", false},
		{"lab-worker", "172.29.3.4", "10.244.1.0/24", false},
		{"lab-worker", "172.29.3.3", "0.0.0.0/0", false},
		{"lab-worker", "172.29.3.3", "10.255.255.0/24", false},
		{"lab-worker", "172.29.3.3", "172.29.3.1/32", false},
		{"lab-worker", "172.29.3.3", "10.244.0.0/16", false},
		{"lab-worker", "172.29.3.3", "10.244.1.7/32", false},
	} {
		if got := st.ownPodRoute(tc.node, netip.MustParseAddr(tc.ip), netip.MustParsePrefix(tc.cidr)); got != tc.want {
			t.Errorf("ownPodRoute(%s, %s, %s) = %v, want %v", tc.node, tc.ip, tc.cidr, got, tc.want)
		}
	}
}

func TestComponents(t *testing.T) {
	st := testState(t)
	var b strings.Builder
	for _, c := range Components(st, "/state/clusters/lab") {
		b.WriteString("# " + c.Name + " after=" + c.After + " health=" + c.Health)
		if c.HealthSocket != "" {
			b.WriteString(" socket=" + c.HealthSocket)
		}
		b.WriteString("\n")
		for _, a := range c.Args {
			b.WriteString(a + "\n")
		}
	}
	golden(t, "components.txt", b.String())
}

// TestHostLinkIn: a crashed cluster's link on the host is found from
// its fabric's bridge or from the far end in its control plane's
// namespace.
func TestHostLinkIn(t *testing.T) {
	for _, tc := range []struct{ links, want string }{
		{"1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\n4: svlbr7: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500\n5: svl7-0@if2: <BROADCAST> master svlbr7\n", "svlbr7"},
		{"1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\n2: eth0@if5: <BROADCAST>\n3: svl12-cp@if1706: <BROADCAST,UP>\n", "svlbr12"},
		{"1: lo: <LOOPBACK>\n2: eth0@if5: <BROADCAST>\n3: svl12-cpx@if1: <UP>\n", ""},
		{"", ""},
	} {
		if got := hostLinkIn(tc.links); got != tc.want {
			t.Errorf("hostLinkIn(%q) = %q, want %q", tc.links, got, tc.want)
		}
	}
}

// A cluster being created owns its fabric index before its supervisor runs:
// a Sweep in another process (liveClusters) must count that index live, or
// it removes the new cluster's link on the host and the index is handed to
// a second cluster (two clusters answering on one 172.29.N.2).
func TestCreatingClusterIndexIsLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the creation locks live in /run/svclab: needs root")
	}
	name := fmt.Sprintf("idx-test-%d", os.Getpid())
	release, fabric, err := lockCreation(name)
	if err != nil {
		t.Fatal(err)
	}
	const index = 251
	if liveClusters().indices[index] != "" {
		t.Fatalf("index %d is live before any cluster took it", index)
	}
	if err := fabric(index); err != nil {
		t.Fatal(err)
	}
	if got := liveClusters().indices[index]; got != name {
		t.Errorf("index %d of a cluster being created is held by %q, want %q", index, got, name)
	}
	// Another cluster's removal leaves that index's link on the host
	// alone; the cluster's own does not.
	if !fabricHeldByOther(index, "crashed-earlier") || fabricHeldByOther(index, name) {
		t.Errorf("fabricHeldByOther(%d) does not tell the holder %s from another cluster", index, name)
	}
	st := testState(t).withoutFabricLinks()
	if st.Bridge != "" || testState(t).Bridge == "" {
		t.Errorf("withoutFabricLinks kept a link's name: %+v", st)
	}
	release()
	if liveClusters().indices[index] != "" {
		t.Errorf("index %d is still live after the creation ended", index)
	}
}
