//go:build linux

package embedded

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/nodeagent"
	"github.com/svclab/svclab/lab/embedded/nsenter"
	"github.com/svclab/svclab/lab/embedded/userns"
)

// The boundary between a lab and svclab, attacked from the lab's side by
// class: the control plane's ports, the identities the lab's PKI can
// mint, the fabric's addresses, and each resource bound — filled until the
// lab stops at its limit while the host and the other lab carry on.
// TestIsolation runs them on its two labs (a attacks, b looks on).

// controlPlaneReach tries every port of the control plane from lab a's
// node shells and Pods: only the API server's answers.
func controlPlaneReach(t *testing.T, a *Cluster, pods ...string) {
	api := a.State().API.IP
	// The attempts run at once: each one the firewall drops waits out its
	// timeout.
	script := fmt.Sprintf(`
reach() { if nc -z -w 2 "$1" "$2" 2>/dev/null; then echo "REACHED $1:$2"; fi; }
for port in 2379 2380 2381 10257 10259; do reach %[1]s $port & reach 127.0.0.1 $port & done
(curl -s -m 3 -o /dev/null -X POST --data-binary x http://%[1]s:2380/raft && echo "REACHED etcd's raft endpoint") &
(curl -sk -m 3 -o /dev/null https://%[1]s:2379/health && echo "REACHED etcd's client port") &
wait
nc -z -w 2 %[1]s 6443 && echo API-OK
`, api)
	in := map[string]func(script string) (string, error){}
	for _, n := range a.State().Nodes {
		in["node "+n.Name] = func(script string) (string, error) { return nodeExec(t, a, n.Name, "sh", "-c", script) }
	}
	for _, pod := range pods {
		in["Pod "+pod] = func(script string) (string, error) { return kubectlErr(t, a, "exec", pod, "--", "sh", "-c", script) }
	}
	for where, run := range in {
		out, err := run(script)
		if !strings.Contains(out, "API-OK") {
			t.Errorf("from %s the API server does not answer: %v\n%s", where, err, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "REACHED") {
				t.Errorf("from %s: %s", where, line)
			}
		}
		// The lab's processes come before the control plane at the
		// lab's memory limit, and cannot move themselves after it.
		// (stderr is dropped: kubectl exec merges it, first, into out.)
		out, err = run("cat /proc/self/oom_score_adj; echo -1 2>/dev/null > /proc/self/oom_score_adj && echo LOWERED")
		if adj, _ := strconv.Atoi(strings.Fields(out + " x")[0]); adj < labOOMScoreAdj || strings.Contains(out, "LOWERED") {
			t.Errorf("a process of %s: oom_score_adj %q (%v), want at least %d and no lower", where, out, err, labOOMScoreAdj)
		}
	}
	// The control plane counts against the lab's limits.
	var s Status
	if err := readJSON(paths{a.dir}.status(), &s); err != nil {
		t.Fatal(err)
	}
	for _, comp := range []string{"etcd", "kube-apiserver"} {
		cs, _ := s.Component(comp)
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cs.PID))
		if !strings.Contains(string(cg), "/"+controlPlaneCgroup(a.st.Name)+"\n") {
			t.Errorf("%s (pid %d) is not in the lab's cgroup:\n%s", comp, cs.PID, cg)
		}
	}
}

// mintedIdentities has the lab's controller-manager sign what a learner
// with cluster-admin can ask for — a serving certificate for the API
// server's addresses and a client certificate — and checks that neither
// passes for the API server with svclab's own clients, nor for the API
// server with a node agent.
func mintedIdentities(t *testing.T, a *Cluster) {
	client, err := a.Client()
	if err != nil {
		t.Fatal(err)
	}
	st := a.State()
	worker := st.Nodes[1]
	serving := signByLab(t, client, "forged-serving", certificatesv1.KubeletServingSignerName,
		x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + worker.Name, Organization: []string{"system:nodes"}},
			DNSNames: []string{"kubernetes", "kubernetes.default.svc", "localhost"}, IPAddresses: []net.IP{net.ParseIP(st.API.IP), net.ParseIP("127.0.0.1")}},
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth})
	clientCert := signByLab(t, client, "forged-client", certificatesv1.KubeAPIServerClientSignerName,
		x509.CertificateRequest{Subject: pkix.Name{CommonName: "mallory", Organization: []string{"learners"}}},
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth})

	// svclab's clients (the grader's, the views', the node agents') with
	// the lab's kubeconfig, sent to a server presenting the forged
	// certificate for the API server's address.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"major":"1","minor":"99","gitVersion":"v1.99.0-forged"}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}}
	srv.StartTLS()
	defer srv.Close()
	cfg, err := a.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	forged := rest.CopyConfig(cfg)
	forged.Host = srv.URL
	forged.TLSClientConfig.ServerName = st.API.IP
	fc, err := kubernetes.NewForConfig(forged)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := fc.Discovery().ServerVersion(); err == nil {
		t.Errorf("svclab's client took a certificate the lab had signed for the API server (it answered %s)", v.GitVersion)
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("svclab's client failed for another reason than the certificate: %v", err)
	}
	for name, file := range map[string]string{"the API server's (server-ca)": serverCAFile, "a node agent's (kubelet-ca)": kubeletCAFile, "etcd's": etcdCAFile} {
		pool := x509.NewCertPool()
		b, _ := os.ReadFile(filepath.Join(paths{a.dir}.pki(), file+".crt"))
		pool.AppendCertsFromPEM(b)
		leaf, _ := x509.ParseCertificate(serving.Certificate[0])
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
			t.Errorf("a certificate the lab had signed verifies against %s authority", name)
		}
	}

	// A node agent's kubelet API refuses the lab's client certificate:
	// only the API server's talks to it.
	ns, err := a.NodeNetns(worker.Name)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return ns.DialFrom(ctx, network, "", addr)
		},
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{clientCert}, InsecureSkipVerify: true},
	}}
	url := fmt.Sprintf("https://%s:%d/pods", worker.IP, nodeagent.KubeletPort)
	if resp, err := hc.Get(url); err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("the node agent answered a client certificate the lab had signed: %s", resp.Status)
		}
	}
	// The API server itself still reaches its node agents (logs go
	// through it).
	if _, err := kubectlErr(t, a, "get", "--raw", "/api/v1/nodes/"+worker.Name+"/proxy/pods"); err != nil {
		t.Errorf("the API server cannot reach the node agent: %v", err)
	}
}

// signByLab asks the lab's API for a certificate from signer, approves it
// as cluster-admin may, and returns it with its key.
func signByLab(t *testing.T, client kubernetes.Interface, name, signer string, req x509.CertificateRequest, usages []certificatesv1.KeyUsage) tls.Certificate {
	t.Helper()
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &req, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer, Usages: usages,
		},
	}
	if csr, err = client.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Learner", Message: "approved by the learner"})
	if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var certPEM []byte
	waitFor(t, 30*time.Second, "the lab's signer to sign "+name, func() (bool, error) {
		got, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		certPEM = got.Status.Certificate
		return len(certPEM) > 0, fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
	keyDER, _ := x509.MarshalECPrivateKey(key)
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// fabricAddresses has a node speak for addresses that are not its own: the
// API server's, an unused one of the fabric, and a made-up MAC address.
// None reaches the gateway's neighbour table or the bridge's, and
// svclab's client still reaches the real API server.
func fabricAddresses(t *testing.T, a *Cluster) {
	st := a.State()
	worker := st.Nodes[1].Name
	base := strings.TrimSuffix(st.Gateway, ".1")
	unused, macvlan := base+".200", base+".201"
	const madeUp = "02:aa:bb:cc:dd:ee"
	out, err := nodeExec(t, a, worker, "sh", "-c", fmt.Sprintf(`
ip addr add %[1]s/32 dev eth0; ping -c 1 -W 1 -I %[1]s %[2]s; ip addr del %[1]s/32 dev eth0
ip addr add %[3]s/32 dev eth0; ping -c 1 -W 1 -I %[3]s %[2]s; ip addr del %[3]s/32 dev eth0
ip link add mv0 link eth0 type macvlan mode bridge && ip link set mv0 address %[5]s up && ip addr add %[4]s/24 dev mv0
ping -c 1 -W 1 -I mv0 %[2]s; ip link del mv0
echo TRIED`, st.API.IP, st.Gateway, unused, macvlan, madeUp))
	if !strings.Contains(out, "TRIED") {
		t.Fatalf("the attempts did not run: %v\n%s", err, out)
	}
	neigh := fabricCmd(st, "ip", "neigh", "show", "dev", st.Bridge)
	for _, ip := range []string{unused, macvlan} {
		if strings.Contains(neigh, ip+" ") {
			t.Errorf("the gateway learned %s, which is no address of the lab's:\n%s", ip, neigh)
		}
	}
	for _, line := range strings.Split(neigh, "\n") {
		if strings.HasPrefix(line, st.API.IP+" ") && !strings.Contains(line, st.mac(st.API.IP)) {
			t.Errorf("the gateway takes the API server's address for a node's: %s", line)
		}
	}
	fdb := fabricCmd(st, "bridge", "fdb", "show", "br", st.Bridge)
	if strings.Contains(fdb, madeUp) {
		t.Errorf("the bridge learned the made-up MAC address:\n%s", fdb)
	}
	// Nor does it send from svclab's addresses to another node: the
	// bridge drops the packets (its counter says so) and no reply comes.
	other := st.Nodes[0].IP
	out, _ = nodeExec(t, a, worker, "sh", "-c", fmt.Sprintf(`
ip addr add %[1]s/32 dev eth0; ping -c 2 -W 1 -I %[1]s %[2]s >/dev/null 2>&1 && echo REPLIED; ip addr del %[1]s/32 dev eth0; echo TRIED`, st.API.IP, other))
	if !strings.Contains(out, "TRIED") || strings.Contains(out, "REPLIED") {
		t.Errorf("a node sending from the API server's address to node %s: %s", other, out)
	}
	rules := fabricCmd(st, "nft", "list", "table", "bridge", "svclab")
	if m := regexp.MustCompile(`ip saddr .* counter packets (\d+) .*no node sends from svclab's addresses`).FindStringSubmatch(rules); m == nil || m[1] == "0" {
		t.Errorf("the bridge did not drop what a node sent from svclab's addresses:\n%s", rules)
	}
	if got := kubectl(t, a, "get", "--raw", "/readyz"); got != "ok" {
		t.Errorf("svclab's client does not reach the API server after the attempts: %q", got)
	}
}

// hostCmd runs a program of the host's and returns its output.
func hostCmd(name string, args ...string) string {
	out, _ := osexec.Command(name, args...).CombinedOutput()
	return string(out)
}

// fabricCmd runs a program of the host's in st's fabric namespace and
// returns its output.
func fabricCmd(st *State, name string, args ...string) string {
	return hostCmd("ip", append([]string{"netns", "exec", st.FabricNetns(), name}, args...)...)
}

// summaryOf is what 'svclab cluster list' says of c.
func summaryOf(c *Cluster) cluster.Summary {
	return (&Provider{StateDir: filepath.Dir(filepath.Dir(c.dir))}).summary(c.st.Name)
}

// diskBound fills lab a's disk from a node shell: the write stops at the
// lab's disk, the learner is told, lab b still writes, and the host's disk
// lost no more than the lab's disk is large.
func diskBound(t *testing.T, a, b *Cluster) {
	ctx := context.Background()
	hostFree := func() int64 {
		var st unix.Statfs_t
		if err := unix.Statfs(filepath.Dir(a.dir), &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bavail) * int64(st.Bsize)
	}
	before := hostFree()
	worker := a.State().Nodes[1].Name
	out, err := nodeExec(t, a, worker, "sh", "-c", "dd if=/dev/zero of=/root/fill bs=1M 2>&1; rc=$?; sync; exit $rc")
	if err == nil || !strings.Contains(out, "No space left on device") {
		t.Errorf("filling the node's filesystem: %v\n%s", err, out)
	}
	d := readDisk(paths{a.dir})
	if !d.Full() || d.SizeBytes > a.State().Limits.DiskBytes {
		t.Errorf("lab a's disk %+v, want full at %d bytes", d, a.State().Limits.DiskBytes)
	}
	if lost := before - hostFree(); lost > a.State().Limits.DiskBytes+64<<20 {
		t.Errorf("the host's disk lost %d MiB to a lab of %d MiB", lost>>20, a.State().Limits.DiskBytes>>20)
	}
	if out, err := nodeExec(t, b, b.State().Nodes[1].Name, "sh", "-c", "dd if=/dev/zero of=/root/ok bs=1M count=8 && rm /root/ok"); err != nil {
		t.Errorf("lab b cannot write while lab a's disk is full: %v\n%s", err, out)
	}
	client, _ := a.Client()
	waitFor(t, 30*time.Second, "an event telling the learner the disk is full", func() (bool, error) {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=FreeDiskSpaceFailed"})
		return err == nil && len(evs.Items) > 0, err
	})
	if s := summaryOf(a); !strings.Contains(s.Detail, "disk") {
		t.Errorf("cluster list does not say the disk is full: %+v", s)
	}
	if out, err := nodeExec(t, a, worker, "rm", "/root/fill"); err != nil {
		t.Errorf("removing the file: %v %s", err, out)
	}
}

// storeBound fills lab a's store with ConfigMaps until the API server
// refuses; lab b still writes; once the learner deletes them, the lab
// accepts changes again.
func storeBound(t *testing.T, a, b *Cluster) {
	ctx := context.Background()
	client, _ := a.Client()
	payload := strings.Repeat("x", 900<<10)
	var made []string
	var refused error
	for i := 0; i < 200 && refused == nil; i++ {
		name := fmt.Sprintf("fill-%d", i)
		_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"x": payload}}, metav1.CreateOptions{})
		if err != nil {
			refused = err
			break
		}
		made = append(made, name)
	}
	if refused == nil || !strings.Contains(refused.Error(), "database space exceeded") {
		t.Fatalf("%d ConfigMaps of 900 KiB in a store of %d MiB: %v", len(made), a.State().Limits.StoreBytes>>20, refused)
	}
	bClient, _ := b.Client()
	if _, err := bClient.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ok"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("lab b cannot write while lab a's store is full: %v", err)
	}
	// The agents' process looks every 5 s, and asks etcd with up to 20 s
	// to answer (a full store under a loaded machine answers slowly):
	// room for a missed look and the next.
	waitFor(t, 90*time.Second, "cluster list to say the store is full", func() (bool, error) {
		s := summaryOf(a)
		return strings.Contains(s.Detail, "API objects fill"), fmt.Errorf("%+v", s)
	})
	for _, name := range made {
		if err := client.CoreV1().ConfigMaps("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting %s in a full store: %v", name, err)
		}
	}
	waitFor(t, 90*time.Second, "the lab to accept changes again", func() (bool, error) {
		_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
		return err == nil, err
	})
	waitFor(t, 30*time.Second, "an event telling the learner", func() (bool, error) {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=StoreFreed"})
		return err == nil && len(evs.Items) > 0, err
	})
}

// logsBound checks that the control plane's logs stay within their
// rotation, whatever the lab made them write.
func logsBound(t *testing.T, c *Cluster) {
	files, _ := filepath.Glob(filepath.Join(paths{c.dir}.logs(), "*.log*"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > componentLogMaxBytes {
			t.Errorf("%s holds %d bytes, past the rotation's %d", f, fi.Size(), componentLogMaxBytes)
		}
	}
}

// ownedIDs checks that the lab's user namespace is its own first id's, so
// that the kernel's per-user counts are the lab's.
func ownedIDs(t *testing.T, c *Cluster) {
	uid, err := userns.OwnerUID(paths{c.dir}.userns())
	if err != nil || uid != c.State().IDs.Range.Base {
		t.Errorf("%s's user namespace is owned by uid %d (%v), want the lab's %d", c.st.Name, uid, err, c.State().IDs.Range.Base)
	}
}

// madeUpNodeRoutes creates Nodes a cluster-admin may make up, asking for
// routes into places that are not the lab's: the control plane's
// namespace, svclab's, takes none of them.
func madeUpNodeRoutes(t *testing.T, a *Cluster) {
	ctx := context.Background()
	client, _ := a.Client()
	st := a.State()
	for name, cidr := range map[string]string{"evil-default": "0.0.0.0/0", "evil-host": st.Gateway + "/32", "evil-resolver": "10.255.255.0/24"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}}}
		n, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		patch := fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalIP","address":%q}]}}`, st.Nodes[1].IP)
		if _, err := client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	// The routes a made-up Node would get appear within a second (the
	// routes follow a watch); the cluster's own are there meanwhile.
	time.Sleep(3 * time.Second)
	routes := hostCmd("ip", "-n", st.API.Netns, "route", "show")
	for _, bad := range []string{"default", st.Gateway + " via", "10.255.255.0/24"} {
		if strings.Contains(routes, bad) {
			t.Errorf("a made-up Node steers the control plane's namespace (%s):\n%s", bad, routes)
		}
	}
	if !strings.Contains(routes, "10.244.") {
		t.Errorf("the control plane has no route to the cluster's Pods:\n%s", routes)
	}
}

// mountsBound asks one node for more mounts than the whole lab may hold:
// the Pod is refused before anything of it is made.
func mountsBound(t *testing.T, a *Cluster) {
	client, _ := a.Client()
	var containers strings.Builder
	for i := range 40 {
		fmt.Fprintf(&containers, "  - {name: c%d, image: registry.k8s.io/pause:3.10, volumeMounts: [", i)
		for j := range 60 {
			fmt.Fprintf(&containers, "{name: v, mountPath: /m%d},", j)
		}
		containers.WriteString("]}\n")
	}
	applyYAML(t, a, fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: mounts}
spec:
  nodeName: %s
  containers:
%s  volumes: [{name: v, emptyDir: {}}]
`, a.State().Nodes[1].Name, containers.String()))
	waitFor(t, time.Minute, "the Pod refused for the lab's mounts", func() (bool, error) {
		p := getPod(t, client, "mounts")
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "OutOfMounts", fmt.Errorf("%s %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
	})
	kubectlErr(t, a, "delete", "pod", "mounts", "--wait=false")
}

// failedStartsLeaveNoMount has a container fail to start again and again
// (a command that is not there, two volumes): the host's mount table does
// not grow with its restarts.
func failedStartsLeaveNoMount(t *testing.T, a *Cluster) {
	client, _ := a.Client()
	applyYAML(t, a, fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: badbin}
spec:
  nodeName: %s
  containers:
  - {name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.66.1, command: ["/no/such/binary"], volumeMounts: [{name: a, mountPath: /a}, {name: b, mountPath: /b}]}
  volumes: [{name: a, emptyDir: {}}, {name: b, emptyDir: {}}]
`, a.State().Nodes[1].Name))
	defer kubectlErr(t, a, "delete", "pod", "badbin", "--wait=false")
	labMounts := func() int {
		return strings.Count(hostCmd("cat", "/proc/self/mountinfo"), "/run/svclab/labs/"+a.State().Name+"/")
	}
	restarts := func() int32 {
		p := getPod(t, client, "badbin")
		if len(p.Status.ContainerStatuses) == 0 {
			return 0
		}
		return p.Status.ContainerStatuses[0].RestartCount
	}
	// Counted while the container waits out its back-off (10 s, then
	// 20 s), not while it tries to start.
	waitFor(t, time.Minute, "the first failed start", func() (bool, error) { return restarts() >= 1, nil })
	first := labMounts()
	waitFor(t, time.Minute, "one more failed start", func() (bool, error) { return restarts() >= 2, nil })
	if now := labMounts(); now > first {
		t.Errorf("the lab's mounts grew from %d to %d over a failed start", first, now)
	}
}

// probesResolveNothing gives a Pod a probe whose host is a name: the node
// agent (root on the host) refuses it rather than resolve it with the
// host's resolver and connect from the host's network.
func probesResolveNothing(t *testing.T, a *Cluster) {
	applyYAML(t, a, `
apiVersion: v1
kind: Pod
metadata: {name: probehost}
spec:
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
    args: ["netexec", "--http-port=8080"]
    livenessProbe: {tcpSocket: {host: lab-data.svclab-exfil-test.invalid, port: 8080}, periodSeconds: 2}
`)
	defer kubectlErr(t, a, "delete", "pod", "probehost", "--wait=false")
	waitFor(t, time.Minute, "the probe refused", func() (bool, error) {
		out := kubectl(t, a, "get", "events", "--field-selector", "involvedObject.name=probehost", "-o", "jsonpath={.items[*].message}")
		return strings.Contains(out, `host "lab-data.svclab-exfil-test.invalid" is a name`), errors.New(out)
	})
}

// componentsServeHealthOnly grants the lab's anonymous users cluster-admin
// (as a learner may) and asks the controller-manager and the scheduler,
// on the control plane's loopback (which the API server's webhooks and
// aggregated APIs reach), for more than their health: refused.
func componentsServeHealthOnly(t *testing.T, a *Cluster) {
	kubectl(t, a, "create", "clusterrolebinding", "anon-admin", "--clusterrole=cluster-admin", "--group=system:unauthenticated")
	defer kubectlErr(t, a, "delete", "clusterrolebinding", "anon-admin")
	for _, port := range []string{"10257", "10259"} {
		for path, want := range map[string]string{"healthz": "200", "metrics": "403", "configz": "403"} {
			got := hostCmd("ip", "netns", "exec", a.State().API.Netns, "curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "https://127.0.0.1:"+port+"/"+path)
			if got != want {
				t.Errorf("127.0.0.1:%s/%s answered %s, want %s", port, path, got, want)
			}
		}
	}
}

// unmountsFollowNoLink: a Pod plants a symlink named as mountinfo escapes
// one of its mount points ("a\040b" for "a b"), pointing at a mount of the
// host's; when the container ends, the agent (root on the host) detaches
// the Pod's mounts and leaves the host's alone.
func unmountsFollowNoLink(t *testing.T, a *Cluster) {
	client, _ := a.Client()
	canary := filepath.Join(t.TempDir(), "canary")
	if err := os.MkdirAll(filepath.Join(canary, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", filepath.Join(canary, "x"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(filepath.Join(canary, "x"), syscall.MNT_DETACH)
	applyYAML(t, a, fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: unmount-link}
spec:
  nodeName: %s
  restartPolicy: Never
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
    command: [sh, -c, 'ln -s %s "/vol/a\\040b" && ls -la /vol && sleep 1']
    volumeMounts: [{name: e, mountPath: /vol}, {name: f, mountPath: "/vol/a b/x"}]
  volumes: [{name: e, emptyDir: {}}, {name: f, emptyDir: {}}]
`, a.State().Nodes[1].Name, canary))
	defer kubectlErr(t, a, "delete", "pod", "unmount-link", "--wait=false")
	waitFor(t, time.Minute, "the Pod ended and its mounts gone", func() (bool, error) {
		p := getPod(t, client, "unmount-link")
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return false, fmt.Errorf("phase %s", p.Status.Phase)
		}
		info := hostCmd("cat", "/proc/self/mountinfo")
		return !strings.Contains(info, `/vol/a\040b/x`), fmt.Errorf("the Pod's mount is still there")
	})
	if !strings.Contains(hostCmd("cat", "/proc/self/mountinfo"), " "+filepath.Join(canary, "x")+" ") {
		t.Error("the host's mount that the Pod's link pointed at was unmounted")
	}
}

// podLayersGo: the image layers mapped for a Pod's own user namespace
// (hostUsers: false) go with the Pod, so making and deleting such Pods
// does not grow the host's mount table.
func podLayersGo(t *testing.T, a *Cluster) {
	layers := func() int {
		return strings.Count(hostCmd("cat", "/proc/self/mountinfo"), runDir(a.State().Name)+"/layers/")
	}
	round := func() {
		for i := range 3 {
			applyYAML(t, a, fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: own-users-%d}
spec:
  hostUsers: false
  terminationGracePeriodSeconds: 0
  containers:
  - {name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.66.1, command: [sleep, "3600"]}
`, i))
		}
		client, _ := a.Client()
		for i := range 3 {
			waitPodReady(t, client, fmt.Sprintf("own-users-%d", i), time.Minute)
		}
		kubectl(t, a, "delete", "pod", "own-users-0", "own-users-1", "own-users-2", "--wait=true")
	}
	// The agent drops a Pod's layers once its containers are gone, a
	// moment after the API server has forgotten the Pod.
	before := layers()
	for range 2 {
		round()
		waitFor(t, time.Minute, "the Pods' layer mounts gone", func() (bool, error) {
			now := layers()
			return now <= before, fmt.Errorf("the lab's layer mounts grew from %d to %d over a round of hostUsers: false Pods", before, now)
		})
	}
}

// confinedPod: a Pod that asks for the runtime's seccomp profile and
// refuses privilege escalation runs filtered and with no_new_privs.
func confinedPod(t *testing.T, a *Cluster) {
	applyYAML(t, a, `
apiVersion: v1
kind: Pod
metadata: {name: confined}
spec:
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
    command: [sleep, "3600"]
    securityContext: {allowPrivilegeEscalation: false}
`)
	defer kubectlErr(t, a, "delete", "pod", "confined", "--wait=false")
	client, _ := a.Client()
	waitPodReady(t, client, "confined", time.Minute)
	out, err := kubectlErr(t, a, "exec", "confined", "--", "grep", "-E", "^(Seccomp|NoNewPrivs):", "/proc/self/status")
	if err != nil || !regexp.MustCompile(`Seccomp:\s+2`).MatchString(out) || !regexp.MustCompile(`NoNewPrivs:\s+1`).MatchString(out) {
		t.Errorf("the confined Pod's status: %q (%v)", out, err)
	}
	// Making a user namespace needs CAP_SYS_ADMIN under the profile.
	if out, err := kubectlErr(t, a, "exec", "confined", "--", "unshare", "-U", "-r", "true"); err == nil || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("unshare -U under the default seccomp profile: %q (%v)", out, err)
	}
}

// hostConntrack: the lab's traffic among its nodes makes no entry in the
// host's conntrack table (a lab cannot fill it), and an entry a lab tries
// to plant there — a reply from a node that spoofs an address of the
// host's — opens no way to a host service: a datagram sent after it to a
// UDP service of the host's (on a documentation address the test adds to
// the host's loopback) never arrives.
func hostConntrack(t *testing.T, a *Cluster) {
	st := a.State()
	x, y := st.Nodes[1], st.Nodes[0]
	const hostAddr, port = "198.51.100.7", 18082
	if out, err := osexec.Command("ip", "addr", "add", hostAddr+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("a host address for the test: %v\n%s", err, out)
	}
	t.Cleanup(func() { osexec.Command("ip", "addr", "del", hostAddr+"/32", "dev", "lo").Run() })
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(hostAddr), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := make(chan string, 16)
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			got <- fmt.Sprintf("%q from %s", buf[:n], from)
		}
	}()

	entries := func() int {
		out := hostCmd("conntrack", "-L", "-s", x.IP)
		return strings.Count(out, "src="+x.IP)
	}
	before := entries()
	out, err := nodeExec(t, a, x.Name, "sh", "-c", fmt.Sprintf(`for p in $(seq 30001 30050); do echo x | socat -u - UDP4:%s:$p; done; echo SENT`, y.IP))
	if !strings.Contains(out, "SENT") {
		t.Fatalf("sending between the nodes: %v\n%s", err, out)
	}
	if n := entries() - before; n > 0 {
		t.Errorf("50 datagrams between the lab's nodes made %d entries in the host's conntrack table", n)
	}
	for _, key := range []string{"iptables", "ip6tables", "arptables"} {
		if out := fabricCmd(st, "sysctl", "-n", "-e", "net.bridge.bridge-nf-call-"+key); strings.TrimSpace(out) != "0" && strings.TrimSpace(out) != "" {
			t.Errorf("the fabric's bridge hands the lab's frames to %s (br_netfilter is on in its namespace): %q", key, out)
		}
	}

	// Node y answers for the host's address; node x sends to it through
	// y (the bridge carries x's datagram and y's reply), then through the
	// gateway, from the same port.
	out, err = nodeExec(t, a, y.Name, "sh", "-c", fmt.Sprintf(`ip addr add %[1]s/32 dev lo && (timeout 8 socat -T3 UDP4-RECVFROM:%[2]d,bind=%[1]s,fork SYSTEM:'echo pong' >/dev/null 2>&1 &) ; echo LISTENING`, hostAddr, port))
	if !strings.Contains(out, "LISTENING") {
		t.Fatalf("node %s answering for %s: %v\n%s", y.Name, hostAddr, err, out)
	}
	defer nodeExec(t, a, y.Name, "ip", "addr", "del", hostAddr+"/32", "dev", "lo")
	out, err = nodeExec(t, a, x.Name, "sh", "-c", fmt.Sprintf(`sleep 0.5
ip route replace %[1]s/32 via %[2]s
echo ping | timeout 3 socat -T1 - UDP4:%[1]s:%[3]d,sourceport=40002
ip route replace %[1]s/32 via %[4]s
echo PLANTED | timeout 3 socat -T1 - UDP4:%[1]s:%[3]d,sourceport=40002
ip route del %[1]s/32; echo TRIED`, hostAddr, y.IP, port, st.Gateway))
	if !strings.Contains(out, "TRIED") {
		t.Fatalf("the attempt did not run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "pong") {
		t.Logf("node %s's answer did not come back (the attempt is moot): %s", y.Name, out)
	}
	select {
	case m := <-got:
		t.Errorf("a host service got %s from the lab", m)
	case <-time.After(2 * time.Second):
	}
	if got := kubectl(t, a, "get", "--raw", "/readyz"); got != "ok" {
		t.Errorf("svclab's client does not reach the API server: %q", got)
	}
}

// readersBound: the host programs svclab runs in a node's network
// namespace (nft, iptables-save, conntrack for the views and the grader)
// run in the lab's readers' cgroup: one that would take more memory than
// that cgroup allows is stopped there, not served by the host.
func readersBound(t *testing.T, a *Cluster) {
	ns, err := a.NodeNetns(a.State().Nodes[1].Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, err := ns.Command(ctx, "cat", "/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if want := "/" + readersPath(a.State().Name); err != nil || !strings.Contains(string(out), want) {
		t.Errorf("a host program in the lab's network runs in cgroups\n%s(%v), want %s", out, err, want)
	}
	// tail -n 1 keeps a line without end in memory: 600 MiB of it.
	cmd, err = ns.Command(ctx, "sh", "-c", "head -c 600M /dev/zero | tail -n 1 | wc -c")
	if err != nil {
		t.Fatal(err)
	}
	out, err = cmd.CombinedOutput()
	if err == nil && strings.TrimSpace(string(out)) == "629145600" {
		t.Errorf("a host program for the lab held 600 MiB: %s", out)
	}
}

// fabricFrames sends, from a node's eth0, what the bridge must not carry:
// a frame under two VLAN tags of ID 0 (the bridge's IPv4 and ARP rules do
// not see through two; the receiver strips both) with an IPv4 packet from
// the API server's address, and datagrams with a broken IP option from
// another node's address (a kernel would answer them with an ICMP error,
// before the input hook, to the forged source): for the gateway, the API
// server and the load balancer, and for another lab's gateway sent to the
// MAC address of the node's own port (a bridge hands frames for its
// ports' addresses to its own stack); ARP requests to svclab's
// namespaces from an address of no fabric's; an ICMP redirect to the
// control plane; and an IGMP report, which the bridge keeps no group for. The bridge drops the tagged
// frames and the one for its port, svclab's namespaces the rest before
// routing, saying so in their counters: none answers, none learns the
// made-up neighbour, and the gateway's neighbour table keeps the API
// server's MAC address whatever a node claims. IPv4 fragments cross the
// fabric (it is the lab's: no reassembly store of the host's sees them).
func fabricFrames(t *testing.T, a, b *Cluster) {
	st := a.State()
	x, y := st.Nodes[1], st.Nodes[0]
	mac := func(s string) []byte {
		hw, err := net.ParseMAC(s)
		if err != nil {
			t.Fatal(err)
		}
		return hw
	}
	ip4 := func(s string) []byte { return net.ParseIP(s).To4() }
	// An ICMP echo from the API server's address to node y, and an ARP
	// reply saying the API server's address is node x's.
	icmp := []byte{8, 0, 0, 0, 0x12, 0x34, 0, 1}
	sum := func(b []byte) uint16 {
		var s uint32
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		for s>>16 != 0 {
			s = s&0xffff + s>>16
		}
		return ^uint16(s)
	}
	c := sum(icmp)
	icmp[2], icmp[3] = byte(c>>8), byte(c)
	iph := []byte{0x45, 0, 0, byte(20 + len(icmp)), 0, 1, 0, 0, 64, 1, 0, 0}
	iph = append(append(iph, ip4(st.API.IP)...), ip4(y.IP)...)
	c = sum(iph)
	iph[10], iph[11] = byte(c>>8), byte(c)
	tagged := func(etherType uint16, payload []byte) []byte {
		f := append(append([]byte{}, mac(st.mac(y.IP))...), mac(st.mac(x.IP))...)
		f = append(f, 0x81, 0x00, 0, 0, 0x81, 0x00, 0, 0, byte(etherType>>8), byte(etherType))
		return append(f, payload...)
	}
	arp := []byte{0, 1, 8, 0, 6, 4, 0, 2}
	arp = append(append(append(append(arp, mac(st.mac(x.IP))...), ip4(st.API.IP)...), mac(st.mac(y.IP))...), ip4(y.IP)...)
	frames := [][]byte{tagged(0x0800, append(iph, icmp...)), tagged(0x0806, arp)}
	arpHost := append(append(append(append([]byte{0, 1, 8, 0, 6, 4, 0, 2}, mac(st.mac(x.IP))...), ip4(st.API.IP)...), mac(st.mac(st.Gateway))...), ip4(st.Gateway)...)
	frames = append(frames, append(append(append(append([]byte{}, mac(st.mac(st.Gateway))...), mac(st.mac(x.IP))...), 0x81, 0x00, 0, 0, 0x81, 0x00, 0, 0, 0x08, 0x06), arpHost...))
	// A datagram for the gateway with a broken IP option (Record Route of
	// length 2), from node y's address: the host's kernel would answer it
	// with an ICMP parameter problem to node y (or to the internet, with
	// an outside source), quoting what the lab wrote.
	udp := []byte{0x11, 0x5c, 0, 9, 0, 8 + 16, 0, 0}
	udp = append(udp, []byte("FROM-LAB-A-XXXXX")...)
	opt := []byte{0x46, 0, 0, byte(24 + len(udp)), 0, 2, 0, 0, 64, 17, 0, 0}
	opt = append(append(append(opt, ip4(y.IP)...), ip4(st.Gateway)...), 7, 2, 0, 0)
	c = sum(opt)
	opt[10], opt[11] = byte(c>>8), byte(c)
	badOptions := append(append(append(append([]byte{}, mac(st.mac(st.Gateway))...), mac(st.mac(x.IP))...), 0x08, 0x00), append(opt, udp...)...)
	frames = append(frames, badOptions)
	// An IGMP report for a group: a snooping bridge would keep an entry
	// for it (thousands, for thousands of groups).
	igmp := []byte{0x16, 0, 0, 0, 239, 1, 2, 3}
	c = sum(igmp)
	igmp[2], igmp[3] = byte(c>>8), byte(c)
	igh := []byte{0x45, 0, 0, byte(20 + len(igmp)), 0, 3, 0, 0, 1, 2, 0, 0}
	igh = append(append(igh, ip4(x.IP)...), 239, 1, 2, 3)
	c = sum(igh)
	igh[10], igh[11] = byte(c>>8), byte(c)
	frames = append(frames, append(append(append(mac("01:00:5e:01:02:03"), mac(st.mac(x.IP))...), 0x08, 0x00), append(igh, igmp...)...))
	// An ICMP redirect to the control plane, as the control-plane node
	// (its next hop to Services): send Service traffic to node x.
	orig := []byte{0x45, 0, 0, 40, 0, 4, 0, 0, 64, 6, 0, 0}
	orig = append(append(append(orig, ip4(st.API.IP)...), 10, 96, 0, 1), make([]byte, 8)...)
	redirect := append(append([]byte{5, 1, 0, 0}, ip4(x.IP)...), orig...)
	c = sum(redirect)
	redirect[2], redirect[3] = byte(c>>8), byte(c)
	rh := []byte{0x45, 0, 0, byte(20 + len(redirect)), 0, 5, 0, 0, 64, 1, 0, 0}
	rh = append(append(rh, ip4(st.ControlPlane().IP)...), ip4(st.API.IP)...)
	c = sum(rh)
	rh[10], rh[11] = byte(c>>8), byte(c)
	frames = append(frames, append(append(append(mac(st.mac(st.API.IP)), mac(st.mac(x.IP))...), 0x08, 0x00), append(rh, redirect...)...))
	// The same for svclab's namespaces on the fabric, at their own MAC
	// addresses; and ARP requests for their addresses from an address of
	// no fabric's (the kernel's neighbour table is every namespace's).
	const madeUp = "10.81.0.1"
	for _, ip := range []string{st.API.IP, st.LB.IP} {
		o := append([]byte{}, opt...)
		copy(o[16:20], ip4(ip))
		o[10], o[11] = 0, 0
		c := sum(o)
		o[10], o[11] = byte(c>>8), byte(c)
		frames = append(frames, append(append(append(append([]byte{}, mac(st.mac(ip))...), mac(st.mac(x.IP))...), 0x08, 0x00), append(o, udp...)...))
		req := append(append(append([]byte{0, 1, 8, 0, 6, 4, 0, 1}, mac(st.mac(x.IP))...), ip4(madeUp)...), make([]byte, 6)...)
		req = append(req, ip4(ip)...)
		frames = append(frames, append(append(append(mac("ff:ff:ff:ff:ff:ff"), mac(st.mac(x.IP))...), 0x08, 0x06), req...))
	}
	// The same for another lab's gateway, from that lab's worker's
	// address, sent to the MAC address of node x's port on the host (the
	// bridge hands a frame for it to the host, which answers for any of
	// its addresses).
	var portLinks []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(fabricCmd(st, "ip", "-j", "link", "show", x.HostVeth)), &portLinks); err != nil || len(portLinks) != 1 {
		t.Fatalf("node %s's port on the bridge: %v", x.Name, err)
	}
	hostPort := mac(portLinks[0].Address)
	other := append([]byte{}, opt...)
	copy(other[12:16], ip4(b.State().Nodes[1].IP))
	copy(other[16:20], ip4(b.State().Gateway))
	other[10], other[11] = 0, 0
	c = sum(other)
	other[10], other[11] = byte(c>>8), byte(c)
	frames = append(frames, append(append(append(append([]byte{}, hostPort...), mac(st.mac(x.IP))...), 0x08, 0x00), append(other, udp...)...))
	// parmProbs counts the ICMP parameter problems sent from the host's
	// network namespace and from the fabric's.
	parmProbsIn := func(b string) int {
		var head []string
		for _, line := range strings.Split(b, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || f[0] != "Icmp:" {
				continue
			}
			if head == nil {
				head = f
				continue
			}
			for i, h := range head {
				if h == "OutParmProbs" && i < len(f) {
					n, _ := strconv.Atoi(f[i])
					return n
				}
			}
		}
		return -1
	}
	parmProbs := func() int {
		n := parmProbsIn(hostCmd("cat", "/proc/net/snmp"))
		for _, ns := range []string{st.FabricNetns(), st.API.Netns, st.LB.Netns} {
			n += parmProbsIn(hostCmd("ip", "netns", "exec", ns, "cat", "/proc/net/snmp"))
		}
		return n
	}
	parmBefore := parmProbs()
	ns, err := a.NodeNetns(x.Name)
	if err != nil {
		t.Fatal(err)
	}
	err = nsenter.Do(ns.(nsenter.Netns).Path, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, f := range frames {
			for range 3 {
				if err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending frames from node %s: %v", x.Name, err)
	}
	out, _ := nodeExec(t, a, x.Name, "sh", "-c", fmt.Sprintf(`ping -c 2 -W 1 -s 3000 %s >/dev/null 2>&1 && echo REPLIED; echo TRIED`, y.IP))
	if !strings.Contains(out, "REPLIED") {
		t.Errorf("a fragmented ping between the lab's nodes got no answer: %s", out)
	}
	if n := parmProbs() - parmBefore; n > 0 {
		t.Errorf("svclab's namespaces sent %d ICMP parameter problem(s) for datagrams a node addressed to them", n)
	}
	if out := fabricCmd(st, "bridge", "mdb", "show"); strings.Contains(out, "239.1.2.3") {
		t.Errorf("the bridge keeps a multicast group a node reported:\n%s", out)
	}
	for _, ns := range []string{st.API.Netns, st.LB.Netns} {
		if out := hostCmd("ip", "-n", ns, "neigh", "show", madeUp); strings.TrimSpace(out) != "" {
			t.Errorf("%s learnt a neighbour at %s, an address of no fabric's: %s", ns, madeUp, out)
		}
		rules := hostCmd("ip", "netns", "exec", ns, "nft", "list", "table", "inet", "svclab")
		if m := regexp.MustCompile(`counter packets (\d+) .*no IP options`).FindStringSubmatch(rules); m == nil || m[1] == "0" {
			t.Errorf("%s did not drop the datagram with a broken option before routing:\n%s", ns, rules)
		}
		if m := regexp.MustCompile(`counter packets (\d+) .*no node reroutes`).FindStringSubmatch(rules); ns == st.API.Netns && (m == nil || m[1] == "0") {
			t.Errorf("%s did not drop the ICMP redirect:\n%s", ns, rules)
		}
		if out := hostCmd("ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.conf.all.accept_redirects", "net.ipv4.conf.eth0.accept_redirects"); strings.Fields(out) == nil || strings.Contains(out, "1") {
			t.Errorf("%s accepts ICMP redirects: %q", ns, out)
		}
	}
	if out := hostCmd("ip", "-n", st.API.Netns, "route", "get", "10.96.0.1"); !strings.Contains(out, "via "+st.ControlPlane().IP) {
		t.Errorf("the control plane's route to Services after a node's redirect: %s", out)
	}
	inet := fabricCmd(st, "nft", "list", "table", "inet", "svclab")
	if m := regexp.MustCompile(`counter packets (\d+) .*not even an ICMP error`).FindStringSubmatch(inet); m == nil || m[1] == "0" {
		t.Errorf("the gateway did not drop the datagram with a broken option before routing:\n%s", inet)
	}
	rules := fabricCmd(st, "nft", "list", "table", "bridge", "svclab")
	for _, rule := range []string{"plain IPv4 and ARP only", "unicast to the lab's own MAC addresses only"} {
		if m := regexp.MustCompile(`counter packets (\d+) .*` + regexp.QuoteMeta(rule)).FindStringSubmatch(rules); m == nil || m[1] == "0" {
			t.Errorf("the bridge did not drop what rule %q is for:\n%s", rule, rules)
		}
	}
	neigh := fabricCmd(st, "ip", "neigh", "show", st.API.IP, "dev", st.Bridge)
	if !strings.Contains(neigh, st.mac(st.API.IP)) || !strings.Contains(neigh, "PERMANENT") {
		t.Errorf("the gateway's neighbour entry for the API server: %q", neigh)
	}
	if got := kubectl(t, a, "get", "--raw", "/readyz"); got != "ok" {
		t.Errorf("svclab's client does not reach the API server after the frames: %q", got)
	}
}

// socketsBound: the buffers of a lab's sockets count against the lab's
// memory (on cgroup v1 only where svclab turned the counting on in the
// very cgroup of the process: a node shell's is its node container's), so
// that a lab holding unread data takes its own memory, not the machine's
// socket memory, which every lab and the host share.
func socketsBound(t *testing.T, a *Cluster) {
	st := a.State()
	usage := func() int64 {
		if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", labCgroup(st.Name), "memory.kmem.tcp.usage_in_bytes")); err == nil {
			n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			return n
		}
		b, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup", labCgroup(st.Name), "memory.stat"))
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "sock" {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
		return 0
	}
	before := usage()
	out, err := nodeExec(t, a, st.Nodes[1].Name, "sh", "-c", `(timeout 20 socat TCP-LISTEN:19999,reuseaddr SYSTEM:'sleep 20' >/dev/null 2>&1 &)
sleep 0.5
(head -c 4000000 /dev/zero | timeout 20 socat -u - TCP:127.0.0.1:19999 >/dev/null 2>&1 &)
sleep 2; echo SENT`)
	if !strings.Contains(out, "SENT") {
		t.Fatalf("holding unread data in a node: %v\n%s", err, out)
	}
	defer nodeExec(t, a, st.Nodes[1].Name, "sh", "-c", "pkill socat; true")
	if n := usage() - before; n < 1<<20 {
		t.Errorf("4 MB held unread in a node's sockets: the lab's cgroup counts %d bytes of socket memory", n)
	}
}
