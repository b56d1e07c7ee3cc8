//go:build linux

package embedded

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kubebin"
)

// kubectlCmd is kubectl against c, for commands a test drives itself
// (stdin, a terminal, output read as it comes).
func kubectlCmd(ctx context.Context, t *testing.T, c *Cluster, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := kubebin.Locate(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"kubectl"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	return cmd
}

// kubectlErr runs kubectl and returns its output and error, for commands
// that are meant to fail.
func kubectlErr(t *testing.T, c *Cluster, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := kubectlCmd(ctx, t, c, args...).CombinedOutput()
	return string(out), err
}

// nodeExec runs cmd in node's network namespace and returns its output.
func nodeExec(t *testing.T, c *Cluster, node string, cmd ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := c.NodeExec(ctx, node, cmd, cluster.Stdio{Stdout: &out, Stderr: &out})
	return out.String(), err
}

// httpGet fetches url from the host with a short timeout.
// httpGet gets url from outside c's nodes (its load balancer's network
// namespace, as an outside client), or from the host's for a nil c: the
// host reaches no node.
func httpGet(c *Cluster, url string) (string, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	if c != nil {
		ns, _, err := c.OutsideNetns()
		if err != nil {
			return "", err
		}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return ns.DialFrom(ctx, network, "", addr)
		}
	}
	cl := &http.Client{Timeout: 2 * time.Second, Transport: tr}
	resp, err := cl.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func applyYAML(t *testing.T, c *Cluster, manifest string) {
	t.Helper()
	cmd := kubectlCmd(context.Background(), t, c, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifest)
	}
}

func getPod(t *testing.T, cl kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	p, err := cl.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPodReady waits for a pod in default to be Ready.
func waitPodReady(t *testing.T, cl kubernetes.Interface, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, timeout, "pod "+name+" Ready", func() (bool, error) {
		p, err := cl.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return podIsReady(p), fmt.Errorf("phase %s, statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	return pod
}

// waiting returns the waiting reason of a pod's first container.
func waiting(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
		return ""
	}
	return p.Status.ContainerStatuses[0].State.Waiting.Reason
}

// sliceEndpoint finds the endpoint of ip in the EndpointSlices of service.
func sliceEndpoint(cl kubernetes.Interface, service, ip string) (*discoveryv1.Endpoint, error) {
	l, err := cl.DiscoveryV1().EndpointSlices("default").List(context.Background(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + service})
	if err != nil {
		return nil, err
	}
	for _, s := range l.Items {
		for i, e := range s.Endpoints {
			if slices.Contains(e.Addresses, ip) {
				return &s.Endpoints[i], nil
			}
		}
	}
	return nil, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// TestPodsE2E checks issue 4's acceptance on one cluster: nodes, add-ons,
// the learner's flow, Services from outside, the CKA debugging commands,
// pod lifecycle as the kubelet runs it, kubectl's pod commands, a stopped
// node agent, and a clean delete.
func TestPodsE2E(t *testing.T) {
	requireLab(t)
	ctx := context.Background()
	p := newTestProvider(t)
	name := uniqueName("pods")
	cc, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := cc.(*Cluster)
	st, dir := c.State(), c.dir
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			p.Delete(context.Background(), name)
		}
	})
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	nodeIP := map[string]string{}
	for _, n := range st.Nodes {
		nodeIP[n.Name] = n.IP
	}

	t.Run("nodes are registered like a kubelet's", func(t *testing.T) {
		nodes, err := cl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 3 {
			t.Fatalf("%d nodes, want 3", len(nodes.Items))
		}
		cidrs := map[string]bool{}
		for _, n := range nodes.Items {
			if !strings.HasPrefix(n.Spec.PodCIDR, "10.244.") || !strings.HasSuffix(n.Spec.PodCIDR, "/24") || cidrs[n.Spec.PodCIDR] {
				t.Errorf("node %s: podCIDR %q", n.Name, n.Spec.PodCIDR)
			}
			cidrs[n.Spec.PodCIDR] = true
			var internal string
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					internal = a.Address
				}
			}
			if internal == "" || internal != nodeIP[n.Name] {
				t.Errorf("node %s: InternalIP %q, want %q", n.Name, internal, nodeIP[n.Name])
			}
			if port := n.Status.DaemonEndpoints.KubeletEndpoint.Port; port != 10250 {
				t.Errorf("node %s: kubelet endpoint port %d", n.Name, port)
			}
			ready := false
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			if !ready {
				t.Errorf("node %s is not Ready: %+v", n.Name, n.Status.Conditions)
			}
			lease, err := cl.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != n.Name || lease.Spec.RenewTime == nil {
				t.Errorf("node %s: lease %v %+v", n.Name, err, lease)
			}
		}
		// The API server reaches the kubelet endpoint: kubectl logs
		// and exec go through it (below); here its health.
		if out := kubectl(t, c, "get", "--raw", "/api/v1/nodes/"+st.Nodes[1].Name+"/proxy/healthz"); out != "ok" {
			t.Errorf("kubelet healthz through the API server: %q", out)
		}
		// The node's /var/log, as upstream's "should proxy logs on node
		// using proxy subresource" asks for it, with and without the
		// kubelet's port; a file in it as the node wrote it.
		node := st.Nodes[1].Name
		if _, err := nodeExec(t, c, node, "sh", "-c", "mkdir -p /var/log && echo from-the-node > /var/log/svclab-e2e.log"); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/api/v1/nodes/" + node + "/proxy/logs/", "/api/v1/nodes/" + node + ":10250/proxy/logs/"} {
			if out := kubectl(t, c, "get", "--raw", p); !strings.Contains(out, `<a href="svclab-e2e.log">`) {
				t.Errorf("%s: %q", p, out)
			}
		}
		if out := kubectl(t, c, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/logs/svclab-e2e.log"); strings.TrimSpace(out) != "from-the-node" {
			t.Errorf("a node's log file through the API server: %q", out)
		}
	})

	t.Run("kube-proxy and CoreDNS run", func(t *testing.T) {
		waitFor(t, 30*time.Second, "kube-proxy on every node and both CoreDNS replicas Running", func() (bool, error) {
			pods, err := cl.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			proxies, dns := map[string]bool{}, 0
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning || !podIsReady(&p) {
					continue
				}
				switch p.Labels["k8s-app"] {
				case "kube-proxy":
					proxies[p.Spec.NodeName] = true
				case "kube-dns":
					dns++
				}
			}
			return len(proxies) == 3 && dns == 2, fmt.Errorf("kube-proxy on %v, %d CoreDNS ready", proxies, dns)
		})
	})

	// The learner's flow, as typed.
	kubectl(t, c, "create", "deployment", "web", "--image=registry.k8s.io/e2e-test-images/agnhost:2.53", "--replicas=3", "--", "/agnhost", "netexec", "--http-port=8080")
	kubectl(t, c, "expose", "deployment", "web", "--port=80", "--target-port=8080")
	kubectl(t, c, "rollout", "status", "deployment/web", "--timeout=60s")
	webPods, err := cl.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(webPods.Items) != 3 {
		t.Fatalf("web pods: %v %d", err, len(webPods.Items))
	}
	webSvc, err := cl.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The rollout is done when the pods are Ready; the EndpointSlice and
	// every node's kube-proxy follow within a second or so (a learner
	// typing the next command never notices).
	for _, n := range st.Nodes {
		waitFor(t, 20*time.Second, "kube-proxy on "+n.Name+" sending to all three web pods", func() (bool, error) {
			out, err := nodeExec(t, c, n.Name, "nft", "list", "table", "ip", "kube-proxy")
			for _, p := range webPods.Items {
				if !strings.Contains(out, p.Status.PodIP) {
					return false, err
				}
			}
			return true, nil
		})
	}

	t.Run("learner flow: the Service by name, DNS", func(t *testing.T) {
		script := `for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo "hostname=$(wget -qO- web.default.svc.cluster.local/hostname)"; done
nslookup web.default.svc.cluster.local
echo "outside:"; nslookup example.com; echo "nslookup-rc=$?"`
		out := kubectl(t, c, "run", "client", "--image=busybox:1.36", "--rm", "-i", "--restart=Never", "--", "sh", "-c", script)
		seen := map[string]int{}
		for _, m := range regexp.MustCompile(`hostname=(\S*)`).FindAllStringSubmatch(out, -1) {
			seen[m[1]]++
		}
		for h := range seen {
			if !slices.ContainsFunc(webPods.Items, func(p corev1.Pod) bool { return p.Name == h }) {
				t.Errorf("wget printed %q, not a web pod's name\n%s", h, out)
			}
		}
		if len(seen) < 2 {
			t.Errorf("12 requests reached %d endpoint(s), want them spread: %v\n%s", len(seen), seen, out)
		}
		inside, outside, _ := strings.Cut(out, "outside:")
		if !strings.Contains(inside, "Address: "+webSvc.Spec.ClusterIP) {
			t.Errorf("nslookup does not give the ClusterIP %s:\n%s", webSvc.Spec.ClusterIP, inside)
		}
		if !strings.Contains(outside, "NXDOMAIN") || strings.Contains(outside, "nslookup-rc=0") {
			t.Errorf("nslookup of an outside name is not NXDOMAIN:\n%s", outside)
		}
	})

	t.Run("conntrack on a node shows the UDP DNS flows", func(t *testing.T) {
		var all strings.Builder
		for _, n := range st.Nodes {
			out, err := nodeExec(t, c, n.Name, "conntrack", "-L", "-p", "udp")
			if err != nil {
				t.Fatalf("conntrack -L on %s: %v\n%s", n.Name, err, out)
			}
			all.WriteString(out)
		}
		if !regexp.MustCompile(`udp\s+17 .*dst=10\.96\.0\.10 sport=\d+ dport=53 src=10\.244\.`).MatchString(all.String()) {
			t.Errorf("no DNATed UDP flow to kube-dns in any node's conntrack table:\n%s", all.String())
		}
	})

	t.Run("CKA debugging commands verbatim", func(t *testing.T) {
		out := kubectl(t, c, "get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o", "wide")
		for _, p := range webPods.Items {
			if !strings.Contains(out, p.Status.PodIP) {
				t.Errorf("endpointslices -o wide lacks %s:\n%s", p.Status.PodIP, out)
			}
		}
		if out := kubectl(t, c, "-n", "kube-system", "exec", "ds/kube-proxy", "--", "wget", "-qO-", "http://127.0.0.1:10249/proxyMode"); strings.TrimSpace(out) != "nftables" {
			t.Errorf("proxyMode = %q", out)
		}
		worker := st.Nodes[1]
		out, err := nodeExec(t, c, worker.Name, "curl", "-sS", "http://"+worker.IP+":10256/healthz")
		if err != nil || !strings.Contains(out, `"healthy":true`) {
			t.Errorf("curl healthz on %s: %v\n%s", worker.Name, err, out)
		}
		// From a node shell, the Service's ClusterIP answers too.
		out, err = nodeExec(t, c, worker.Name, "curl", "-sS", "-m", "5", "http://"+webSvc.Spec.ClusterIP+"/hostname")
		if err != nil || !strings.HasPrefix(out, "web-") {
			t.Errorf("curl the ClusterIP from %s: %v\n%s", worker.Name, err, out)
		}
		out, err = nodeExec(t, c, worker.Name, "nft", "list", "table", "ip", "kube-proxy")
		if err != nil || !strings.Contains(out, webSvc.Spec.ClusterIP) {
			t.Errorf("nft list table ip kube-proxy on %s: %v, no rule for %s\n%.2000s", worker.Name, err, webSvc.Spec.ClusterIP, out)
		}
		if out := kubectl(t, c, "-n", "kube-system", "get", "cm", "kube-proxy", "-o", "yaml"); !strings.Contains(out, "mode: nftables") {
			t.Errorf("kube-proxy ConfigMap:\n%s", out)
		}
	})

	t.Run("NodePort answers on every node", func(t *testing.T) {
		kubectl(t, c, "expose", "deployment", "web", "--name=web-np", "--type=NodePort", "--port=80", "--target-port=8080")
		svc, err := cl.CoreV1().Services("default").Get(ctx, "web-np", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		np := svc.Spec.Ports[0].NodePort
		for _, n := range st.Nodes {
			waitFor(t, 20*time.Second, "NodePort on "+n.Name, func() (bool, error) {
				out, err := httpGet(c, fmt.Sprintf("http://%s:%d/hostname", n.IP, np))
				return err == nil && strings.HasPrefix(out, "web-"), err
			})
		}
	})

	t.Run("externalTrafficPolicy Local", func(t *testing.T) {
		kubectl(t, c, "expose", "deployment", "web", "--name=web-local", "--type=NodePort", "--port=80", "--target-port=8080",
			`--overrides={"apiVersion":"v1","spec":{"externalTrafficPolicy":"Local"}}`)
		svc, err := cl.CoreV1().Services("default").Get(ctx, "web-local", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			t.Fatalf("externalTrafficPolicy %q", svc.Spec.ExternalTrafficPolicy)
		}
		np := svc.Spec.Ports[0].NodePort
		hasEndpoint := map[string]bool{}
		for _, p := range webPods.Items {
			hasEndpoint[p.Spec.NodeName] = true
		}
		if len(hasEndpoint) == 3 {
			t.Skip("every node runs a web pod; no node to drop on")
		}
		for _, n := range st.Nodes {
			url := fmt.Sprintf("http://%s:%d/clientip", n.IP, np)
			if hasEndpoint[n.Name] {
				// The backend sees the outside client's own address:
				// no SNAT.
				waitFor(t, 20*time.Second, "eTP Local NodePort answering on "+n.Name+" with the client's IP", func() (bool, error) {
					out, err := httpGet(c, url)
					host, _, _ := net.SplitHostPort(strings.TrimSpace(out))
					return err == nil && host == st.LB.IP, fmt.Errorf("%v: %q", err, out)
				})
				continue
			}
			// Nodes without an endpoint drop; wait until kube-proxy
			// has the service at all, then make sure.
			waitFor(t, 20*time.Second, "kube-proxy rules for web-local on "+n.Name, func() (bool, error) {
				out, err := nodeExec(t, c, n.Name, "nft", "list", "table", "ip", "kube-proxy")
				return err == nil && strings.Contains(out, strconv.Itoa(int(np))), err
			})
			if out, err := httpGet(c, url); err == nil {
				t.Errorf("node %s has no web pod but answered the eTP Local NodePort: %q", n.Name, out)
			}
		}
	})

	// Pod lifecycle and kubectl's pod commands, in parallel.
	t.Run("pods", func(t *testing.T) {
		t.Run("exec, exit codes and a terminal", func(t *testing.T) {
			t.Parallel()
			kubectl(t, c, "run", "shell", "--image=busybox:1.36", "--", "sleep", "3600")
			waitPodReady(t, cl, "shell", 30*time.Second)
			// Exit codes pass through.
			out, err := kubectlErr(t, c, "exec", "shell", "--", "sh", "-c", "echo out; exit 7")
			var ee *exec.ExitError
			if !strings.Contains(out, "out") || !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Errorf("exec exit 7: %v\n%s", err, out)
			}
			// stdin (-i).
			cmd := kubectlCmd(ctx, t, c, "exec", "-i", "shell", "--", "tr", "a-z", "A-Z")
			cmd.Stdin = strings.NewReader("piped through\n")
			if b, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "PIPED THROUGH" {
				t.Errorf("exec -i: %v %q", err, b)
			}
			// kubectl cp, both ways.
			src := filepath.Join(t.TempDir(), "in.txt")
			os.WriteFile(src, []byte("copied in\n"), 0o644)
			kubectl(t, c, "cp", src, "shell:/tmp/in.txt")
			if out := kubectl(t, c, "exec", "shell", "--", "cat", "/tmp/in.txt"); out != "copied in\n" {
				t.Errorf("after kubectl cp into the pod: %q", out)
			}
			back := filepath.Join(t.TempDir(), "back.txt")
			kubectl(t, c, "cp", "shell:/tmp/in.txt", back)
			if b, err := os.ReadFile(back); err != nil || string(b) != "copied in\n" {
				t.Errorf("kubectl cp out of the pod: %v %q", err, b)
			}
			// -it on a terminal: the container sees a tty of the
			// client's size, and the shell reads what is typed.
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			cmd = kubectlCmd(tctx, t, c, "exec", "-it", "shell", "--", "sh")
			f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 33, Cols: 101})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var buf syncBuffer
			go io.Copy(&buf, f)
			time.Sleep(500 * time.Millisecond)
			io.WriteString(f, "tty; stty size; echo done-$((6*7))\r")
			waitFor(t, 15*time.Second, "the terminal session's output", func() (bool, error) {
				return strings.Contains(buf.String(), "done-42"), fmt.Errorf("output so far %q", buf.String())
			})
			if got := buf.String(); !strings.Contains(got, "/dev/pts/") || !strings.Contains(got, "33 101") {
				t.Errorf("exec -it: no terminal of size 33x101:\n%q", got)
			}
			io.WriteString(f, "exit 3\r")
			err = cmd.Wait()
			if !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Errorf("exec -it exit 3: %v", err)
			}
		})

		t.Run("run -it and attach", func(t *testing.T) {
			t.Parallel()
			tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			cmd := kubectlCmd(tctx, t, c, "run", "term", "--image=busybox:1.36", "--rm", "-it", "--restart=Never", "--", "sh")
			f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 27, Cols: 93})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var buf syncBuffer
			go io.Copy(&buf, f)
			waitFor(t, 30*time.Second, "the attached session", func() (bool, error) {
				return strings.Contains(buf.String(), "If you don't see a command prompt"), fmt.Errorf("output so far %q", buf.String())
			})
			// kubectl sends the terminal's size just after attaching, as
			// the first resize: ask until it has arrived.
			waitFor(t, 15*time.Second, "the shell on a terminal of the client's size", func() (bool, error) {
				io.WriteString(f, "tty; stty size; echo sum-$((40+2))\r")
				time.Sleep(500 * time.Millisecond)
				got := buf.String()
				return strings.Contains(got, "sum-42") && strings.Contains(got, "/dev/pts/") && strings.Contains(got, "27 93"), fmt.Errorf("output so far %q", got)
			})
			io.WriteString(f, "exit 0\r")
			if err := cmd.Wait(); err != nil {
				t.Errorf("run -it: %v\n%q", err, buf.String())
			}
			// attach -i to a running pod with stdin: its input goes in,
			// its output from then on comes back.
			applyYAML(t, c, `apiVersion: v1
kind: Pod
metadata: {name: reader}
spec:
  containers:
  - name: c
    image: busybox:1.36
    stdin: true
    command: [sh, -c, 'echo early; while read l; do echo "got $l"; done']
`)
			waitPodReady(t, cl, "reader", 30*time.Second)
			actx, cancel2 := context.WithTimeout(ctx, 20*time.Second)
			defer cancel2()
			acmd := kubectlCmd(actx, t, c, "attach", "-i", "reader")
			in, _ := acmd.StdinPipe()
			var out syncBuffer
			acmd.Stdout = &out
			if err := acmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 15*time.Second, "attach echoing input", func() (bool, error) {
				io.WriteString(in, "ping\n")
				time.Sleep(300 * time.Millisecond)
				return strings.Contains(out.String(), "got ping"), fmt.Errorf("output so far %q", out.String())
			})
			cancel2()
			acmd.Wait()
			if strings.Contains(out.String(), "early") {
				t.Errorf("attach replayed output from before it attached: %q", out.String())
			}
		})

		t.Run("logs --tail, -f and --previous; CrashLoopBackOff", func(t *testing.T) {
			t.Parallel()
			applyYAML(t, c, `apiVersion: v1
kind: Pod
metadata: {name: counter}
spec:
  containers:
  - name: c
    image: busybox:1.36
    command: [sh, -c, 'i=0; while [ $i -lt 8 ]; do i=$((i+1)); echo "line $i"; sleep 0.3; done; exit 3']
`)
			waitFor(t, 30*time.Second, "counter running", func() (bool, error) {
				p := getPod(t, cl, "counter")
				return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil, nil
			})
			// -f follows until the container exits.
			fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			out, err := kubectlCmd(fctx, t, c, "logs", "-f", "counter").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "line 1\n") || !strings.HasSuffix(string(out), "line 8\n") {
				t.Errorf("logs -f: %v\n%s", err, out)
			}
			// The container exits 3 and restarts after the back-off.
			var p *corev1.Pod
			waitFor(t, 20*time.Second, "CrashLoopBackOff with a restart", func() (bool, error) {
				p = getPod(t, cl, "counter")
				return waiting(p) == "CrashLoopBackOff" && p.Status.ContainerStatuses[0].RestartCount >= 1, fmt.Errorf("%+v", p.Status.ContainerStatuses)
			})
			last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
			if last == nil || last.ExitCode != 3 || last.Reason != "Error" {
				t.Errorf("last state %+v, want terminated with exit code 3", last)
			}
			if out := kubectl(t, c, "get", "pod", "counter"); !strings.Contains(out, "CrashLoopBackOff") {
				t.Errorf("kubectl get pod:\n%s", out)
			}
			// While it waits to restart, plain logs show the run that
			// ended too, as the kubelet's.
			if out := kubectl(t, c, "logs", "counter", "--tail=1"); out != "line 8\n" {
				t.Errorf("logs during CrashLoopBackOff = %q", out)
			}
			out2 := kubectl(t, c, "logs", "counter", "--previous", "--tail=2")
			if out2 != "line 7\nline 8\n" {
				t.Errorf("logs --previous --tail=2 = %q", out2)
			}
			waitFor(t, 10*time.Second, "the back-off event", func() (bool, error) {
				out := kubectl(t, c, "get", "events", "--field-selector", "involvedObject.name=counter")
				return strings.Contains(out, "Back-off restarting failed container c"), fmt.Errorf("events:\n%s", out)
			})
		})

		t.Run("restartPolicy Never and OnFailure", func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name, policy, script string
				phase                corev1.PodPhase
			}{
				{"never-fails", "Never", "exit 1", corev1.PodFailed},
				{"onfailure-ok", "OnFailure", "exit 0", corev1.PodSucceeded},
			} {
				kubectl(t, c, "run", tc.name, "--image=busybox:1.36", "--restart="+tc.policy, "--", "sh", "-c", tc.script)
				waitFor(t, 30*time.Second, tc.name+" "+string(tc.phase), func() (bool, error) {
					p := getPod(t, cl, tc.name)
					return p.Status.Phase == tc.phase, fmt.Errorf("phase %s", p.Status.Phase)
				})
				if p := getPod(t, cl, tc.name); p.Status.ContainerStatuses[0].RestartCount != 0 {
					t.Errorf("%s restarted %d times", tc.name, p.Status.ContainerStatuses[0].RestartCount)
				}
			}
		})

		t.Run("unknown image", func(t *testing.T) {
			t.Parallel()
			kubectl(t, c, "run", "noimage", "--image=example.com/no-such-image:1.0")
			seen := map[string]bool{}
			waitFor(t, 30*time.Second, "ErrImagePull, then ImagePullBackOff", func() (bool, error) {
				w := waiting(getPod(t, cl, "noimage"))
				if w == "ImagePullBackOff" && !seen["ErrImagePull"] {
					return false, fmt.Errorf("ImagePullBackOff before ErrImagePull")
				}
				seen[w] = true
				return seen["ErrImagePull"] && seen["ImagePullBackOff"], fmt.Errorf("seen %v", seen)
			})
			if out, err := kubectlErr(t, c, "logs", "noimage"); err == nil || !strings.Contains(out, "is waiting to start") {
				t.Errorf("logs of a pod whose image cannot be pulled: %v %q", err, out)
			}
			out := kubectl(t, c, "get", "events", "--field-selector", "involvedObject.name=noimage", "-o", "custom-columns=REASON:.reason,MESSAGE:.message")
			if !regexp.MustCompile(`Failed\s+Failed to pull image "example.com/no-such-image:1.0": .*Use one of: busybox,.*registry.k8s.io/e2e-test-images/agnhost`).MatchString(out) {
				t.Errorf("no event listing the available images:\n%s", out)
			}
		})

		t.Run("init containers, volumes and env", func(t *testing.T) {
			t.Parallel()
			applyYAML(t, c, `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {greeting: hello-from-configmap, mode: fast}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: volumes, labels: {tier: demo}}
spec:
  initContainers:
  - name: prepare
    image: busybox:1.36
    command: [sh, -c, 'echo prepared > /work/init.txt']
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: main
    image: busybox:1.36
    env:
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: TIER, valueFrom: {fieldRef: {fieldPath: "metadata.labels['tier']"}}}
    - {name: GREETING, value: "on-$(NODE)-$(CFG_mode)"}
    - {name: ESCAPED, value: "$$(NODE)"}
    - {name: UNDEFINED, value: "$(NOPE)"}
    - {name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}}
    envFrom: [{configMapRef: {name: settings}, prefix: CFG_}]
    command: [sh, -c, 'echo "args: $(GREETING)"; sleep 3600']
    volumeMounts:
    - {name: work, mountPath: /work}
    - {name: config, mountPath: /etc/config}
    - {name: secret, mountPath: /etc/secret, readOnly: true}
  volumes:
  - {name: work, emptyDir: {}}
  - {name: config, configMap: {name: settings}}
  - {name: secret, secret: {secretName: creds}}
`)
			pod := waitPodReady(t, cl, "volumes", 30*time.Second)
			if len(pod.Status.InitContainerStatuses) != 1 || pod.Status.InitContainerStatuses[0].State.Terminated == nil ||
				pod.Status.InitContainerStatuses[0].State.Terminated.Reason != "Completed" {
				t.Errorf("init container status %+v", pod.Status.InitContainerStatuses)
			}
			out := kubectl(t, c, "exec", "volumes", "-c", "main", "--", "sh", "-c",
				`cat /work/init.txt /etc/config/greeting /etc/secret/password; echo; env | grep -E '^(NODE|POD_IP|TIER|GREETING|ESCAPED|UNDEFINED|PASSWORD|CFG_|WEB_SERVICE_HOST|KUBERNETES_SERVICE_HOST)' | sort`)
			want := []string{"prepared", "hello-from-configmaps3cret", "CFG_greeting=hello-from-configmap", "CFG_mode=fast",
				"ESCAPED=$(NODE)", "GREETING=on-" + pod.Spec.NodeName + "-fast", "KUBERNETES_SERVICE_HOST=10.96.0.1",
				"NODE=" + pod.Spec.NodeName, "PASSWORD=s3cret", "POD_IP=" + pod.Status.PodIP, "TIER=demo", "UNDEFINED=$(NOPE)",
				"WEB_SERVICE_HOST=" + webSvc.Spec.ClusterIP}
			if got := strings.Fields(out); !slices.Equal(got, want) {
				t.Errorf("files and env:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if out := kubectl(t, c, "logs", "volumes", "-c", "main"); out != "args: on-"+pod.Spec.NodeName+"-fast\n" {
				t.Errorf("command $(VAR) expansion: %q", out)
			}
			// An edited ConfigMap reaches the running pod's volume.
			kubectl(t, c, "patch", "configmap", "settings", "-p", `{"data":{"greeting":"edited"}}`)
			waitFor(t, 30*time.Second, "the edited ConfigMap in the pod's volume", func() (bool, error) {
				out, err := kubectlErr(t, c, "exec", "volumes", "-c", "main", "--", "cat", "/etc/config/greeting")
				return err == nil && out == "edited", fmt.Errorf("%v: %q", err, out)
			})
			// A volume whose ConfigMap does not exist yet: the pod waits
			// in ContainerCreating with FailedMount events, and starts
			// once the ConfigMap is made.
			kubectl(t, c, "run", "latecm", "--image=busybox:1.36", `--overrides={"apiVersion":"v1","spec":{"containers":[{"name":"latecm","image":"busybox:1.36","command":["sleep","3600"],"volumeMounts":[{"name":"v","mountPath":"/v"}]}],"volumes":[{"name":"v","configMap":{"name":"later"}}]}}`)
			waitFor(t, 20*time.Second, "a FailedMount event", func() (bool, error) {
				out := kubectl(t, c, "get", "events", "--field-selector", "involvedObject.name=latecm")
				return strings.Contains(out, "FailedMount"), fmt.Errorf("events:\n%s", out)
			})
			if p := getPod(t, cl, "latecm"); p.Status.Phase != corev1.PodPending || waiting(p) != "ContainerCreating" {
				t.Errorf("pod with a missing ConfigMap: phase %s, waiting %q", p.Status.Phase, waiting(p))
			}
			kubectl(t, c, "create", "configmap", "later", "--from-literal=k=v")
			waitPodReady(t, cl, "latecm", 45*time.Second)
			// A missing Secret: CreateContainerConfigError, no restarts.
			kubectl(t, c, "run", "nosecret", "--image=busybox:1.36", `--overrides={"apiVersion":"v1","spec":{"containers":[{"name":"nosecret","image":"busybox:1.36","command":["sleep","3600"],"env":[{"name":"X","valueFrom":{"secretKeyRef":{"name":"missing","key":"k"}}}]}]}}`)
			waitFor(t, 30*time.Second, "CreateContainerConfigError", func() (bool, error) {
				p := getPod(t, cl, "nosecret")
				return waiting(p) == "CreateContainerConfigError" && p.Status.ContainerStatuses[0].RestartCount == 0, fmt.Errorf("%+v", p.Status.ContainerStatuses)
			})
		})

		t.Run("port-forward", func(t *testing.T) {
			t.Parallel()
			target := webPods.Items[0]
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			cmd := kubectlCmd(pctx, t, c, "port-forward", "pod/"+target.Name, ":8080")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); cmd.Wait() }()
			line, err := bufio.NewReader(stdout).ReadString('\n')
			m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`).FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("port-forward said %q (%v)", line, err)
			}
			for range 3 { // several connections over one forward
				if out, err := httpGet(nil, "http://127.0.0.1:"+m[1]+"/hostname"); err != nil || out != target.Name {
					t.Errorf("through port-forward: %v %q, want %q", err, out, target.Name)
				}
			}
		})

		t.Run("readiness probe flips the EndpointSlice", func(t *testing.T) {
			t.Parallel()
			applyYAML(t, c, `apiVersion: v1
kind: Pod
metadata: {name: gated, labels: {app: gated}}
spec:
  containers:
  - name: c
    image: busybox:1.36
    command: [sleep, "3600"]
    readinessProbe:
      exec: {command: [cat, /tmp/ready]}
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Service
metadata: {name: gated}
spec:
  selector: {app: gated}
  ports: [{port: 80}]
`)
			var ip string
			waitFor(t, 30*time.Second, "gated running but not ready", func() (bool, error) {
				p := getPod(t, cl, "gated")
				ip = p.Status.PodIP
				return p.Status.Phase == corev1.PodRunning && ip != "" && !podIsReady(p), nil
			})
			condition := func(want bool) func() (bool, error) {
				return func() (bool, error) {
					e, err := sliceEndpoint(cl, "gated", ip)
					if e == nil {
						return false, err
					}
					return isTrue(e.Conditions.Ready) == want && isTrue(e.Conditions.Serving) == want, fmt.Errorf("conditions %+v", e.Conditions)
				}
			}
			waitFor(t, 15*time.Second, "endpoint not ready", condition(false))
			kubectl(t, c, "exec", "gated", "--", "touch", "/tmp/ready")
			waitFor(t, 15*time.Second, "endpoint ready once the probe passes", condition(true))
			kubectl(t, c, "exec", "gated", "--", "rm", "/tmp/ready")
			waitFor(t, 15*time.Second, "endpoint not ready once the probe fails", condition(false))
			waitFor(t, 10*time.Second, "an Unhealthy event", func() (bool, error) {
				out := kubectl(t, c, "get", "events", "--field-selector", "involvedObject.name=gated")
				return strings.Contains(out, "Readiness probe failed"), fmt.Errorf("events:\n%s", out)
			})
		})

		t.Run("sidecars: restartable init containers serve beside the app, their named ports as Service targets, and stop after it", func(t *testing.T) {
			t.Parallel()
			applyYAML(t, c, `apiVersion: v1
kind: Pod
metadata: {name: with-sidecar, labels: {app: with-sidecar}}
spec:
  initContainers:
  - name: proxy
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [netexec, --http-port=8080]
    ports: [{name: http-sidecar, containerPort: 8080}]
    restartPolicy: Always
    readinessProbe:
      httpGet: {path: /healthz, port: http-sidecar}
      periodSeconds: 1
  containers:
  - name: app
    image: busybox:1.36
    command: [sleep, "3600"]
---
apiVersion: v1
kind: Service
metadata: {name: with-sidecar}
spec:
  selector: {app: with-sidecar}
  ports: [{name: http, port: 80, targetPort: http-sidecar}]
---
apiVersion: v1
kind: Pod
metadata: {name: job-with-sidecar}
spec:
  restartPolicy: Never
  initContainers:
  - name: logger
    image: busybox:1.36
    command: [sleep, "3600"]
    restartPolicy: Always
  containers:
  - name: task
    image: busybox:1.36
    command: [sh, -c, "sleep 2"]
`)
			p := waitPodReady(t, cl, "with-sidecar", 60*time.Second)
			if len(p.Status.InitContainerStatuses) != 1 || p.Status.InitContainerStatuses[0].State.Running == nil || !p.Status.InitContainerStatuses[0].Ready {
				t.Errorf("the sidecar's status: %+v", p.Status.InitContainerStatuses)
			}
			var svcIP string
			waitFor(t, 30*time.Second, "the Service answered by the sidecar", func() (bool, error) {
				svc, err := cl.CoreV1().Services("default").Get(ctx, "with-sidecar", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				svcIP = svc.Spec.ClusterIP
				out, err := nodeExec(t, c, st.Nodes[1].Name, "curl", "-s", "-m", "2", "http://"+svcIP+"/hostname")
				return strings.TrimSpace(out) == "with-sidecar", fmt.Errorf("%q: %v", out, err)
			})
			// The app containers of a Pod that runs to completion end it
			// (Succeeded) though its sidecar would run for an hour.
			waitFor(t, 60*time.Second, "job-with-sidecar Succeeded", func() (bool, error) {
				p := getPod(t, cl, "job-with-sidecar")
				return p.Status.Phase == corev1.PodSucceeded, fmt.Errorf("phase %s, init %+v", p.Status.Phase, p.Status.InitContainerStatuses)
			})
		})

		t.Run("hostPort", func(t *testing.T) {
			t.Parallel()
			applyYAML(t, c, `apiVersion: v1
kind: Pod
metadata: {name: published}
spec:
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [netexec, --http-port=8080]
    ports: [{containerPort: 8080, hostPort: 8081}]
`)
			pod := waitPodReady(t, cl, "published", 30*time.Second)
			url := fmt.Sprintf("http://%s:8081/hostname", pod.Status.HostIP)
			waitFor(t, 10*time.Second, "the hostPort answering on the pod's node", func() (bool, error) {
				out, err := httpGet(c, url) // Ready needs no probe: the server may still be starting
				return err == nil && out == "published", fmt.Errorf("%v %q", err, out)
			})
			// Another node's address does not publish it.
			for _, n := range st.Nodes {
				if n.IP != pod.Status.HostIP {
					if out, err := httpGet(c, fmt.Sprintf("http://%s:8081/hostname", n.IP)); err == nil {
						t.Errorf("hostPort answered on %s, not the pod's node: %q", n.Name, out)
					}
					break
				}
			}
			// A pod bound to the same node (past the scheduler) asking
			// for the same hostPort is rejected; the first carries on.
			kubectl(t, c, "run", "clash", "--image=busybox:1.36",
				`--overrides={"apiVersion":"v1","spec":{"nodeName":"`+pod.Spec.NodeName+`","containers":[{"name":"clash","image":"busybox:1.36","command":["sleep","3600"],"ports":[{"containerPort":80,"hostPort":8081}]}]}}`)
			waitFor(t, 20*time.Second, "the clashing pod rejected", func() (bool, error) {
				p := getPod(t, cl, "clash")
				return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "NodePorts", fmt.Errorf("phase %s reason %q", p.Status.Phase, p.Status.Reason)
			})
			if out, err := httpGet(c, url); err != nil || out != "published" {
				t.Errorf("the first pod's hostPort after the rejection: %v %q", err, out)
			}
			// By address and protocol, as the kubelet admits them: the
			// same hostPort on the node's address over TCP and over UDP
			// are both admitted; on 0.0.0.0 beside them, rejected.
			byAddr := func(name, proto string) string {
				return `--overrides={"apiVersion":"v1","spec":{"nodeName":"` + pod.Spec.NodeName + `","containers":[{"name":"` + name + `","image":"registry.k8s.io/e2e-test-images/agnhost:2.53","args":["netexec","--http-port=8080","--udp-port=8080"],"ports":[{"containerPort":8080,"hostPort":8082,"hostIP":"` + pod.Status.HostIP + `","protocol":"` + proto + `"}]}]}}`
			}
			kubectl(t, c, "run", "by-addr-tcp", "--image=registry.k8s.io/e2e-test-images/agnhost:2.53", byAddr("by-addr-tcp", "TCP"))
			kubectl(t, c, "run", "by-addr-udp", "--image=registry.k8s.io/e2e-test-images/agnhost:2.53", byAddr("by-addr-udp", "UDP"))
			waitPodReady(t, cl, "by-addr-tcp", 30*time.Second)
			waitPodReady(t, cl, "by-addr-udp", 30*time.Second)
			addrURL := fmt.Sprintf("http://%s:8082/hostname", pod.Status.HostIP)
			waitFor(t, 10*time.Second, "the hostPort on the node's address answering", func() (bool, error) {
				out, err := httpGet(c, addrURL)
				return err == nil && out == "by-addr-tcp", fmt.Errorf("%v %q", err, out)
			})
			kubectl(t, c, "run", "any-addr", "--image=busybox:1.36",
				`--overrides={"apiVersion":"v1","spec":{"nodeName":"`+pod.Spec.NodeName+`","containers":[{"name":"any-addr","image":"busybox:1.36","command":["sleep","3600"],"ports":[{"containerPort":80,"hostPort":8082}]}]}}`)
			waitFor(t, 20*time.Second, "the pod asking for 0.0.0.0 rejected", func() (bool, error) {
				p := getPod(t, cl, "any-addr")
				return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "NodePorts", fmt.Errorf("phase %s reason %q", p.Status.Phase, p.Status.Reason)
			})
			// Gone with the pod.
			kubectl(t, c, "delete", "pod", "published", "--grace-period=1")
			if out, err := httpGet(c, url); err == nil {
				t.Errorf("hostPort still answers after the pod's deletion: %q", out)
			}
		})

		t.Run("readiness gates: Ready, and in the Service, only once another component says so", func(t *testing.T) {
			t.Parallel()
			applyYAML(t, c, `
apiVersion: v1
kind: Pod
metadata: {name: blue, labels: {app: blue}}
spec:
  readinessGates: [{conditionType: example.com/blue}]
  containers:
  - {name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: [netexec, --http-port=8080]}
---
apiVersion: v1
kind: Service
metadata: {name: blue}
spec:
  selector: {app: blue}
  ports: [{port: 80, targetPort: 8080}]
`)
			var pod *corev1.Pod
			waitFor(t, 60*time.Second, "blue's containers ready, the Pod not", func() (bool, error) {
				pod = getPod(t, cl, "blue")
				var containers, ready *corev1.PodCondition
				for i, cd := range pod.Status.Conditions {
					switch cd.Type {
					case corev1.ContainersReady:
						containers = &pod.Status.Conditions[i]
					case corev1.PodReady:
						ready = &pod.Status.Conditions[i]
					}
				}
				return containers != nil && containers.Status == corev1.ConditionTrue && ready != nil && ready.Status == corev1.ConditionFalse && ready.Reason == "ReadinessGatesNotReady",
					fmt.Errorf("conditions %+v", pod.Status.Conditions)
			})
			if ep, _ := sliceEndpoint(cl, "blue", pod.Status.PodIP); ep != nil && isTrue(ep.Conditions.Ready) {
				t.Errorf("blue is ready in its Service's EndpointSlice before its gate")
			}
			// The other component (a blue/green controller) opens the gate.
			kubectl(t, c, "patch", "pod", "blue", "--subresource=status", "--type=strategic",
				"-p", `{"status":{"conditions":[{"type":"example.com/blue","status":"True"}]}}`)
			waitPodReady(t, cl, "blue", 30*time.Second)
			waitFor(t, 30*time.Second, "blue ready in the EndpointSlice", func() (bool, error) {
				ep, err := sliceEndpoint(cl, "blue", pod.Status.PodIP)
				return err == nil && ep != nil && isTrue(ep.Conditions.Ready), err
			})
			// The node's status writes keep the gate's condition; closing
			// it takes the Pod out again.
			kubectl(t, c, "patch", "pod", "blue", "--subresource=status", "--type=strategic",
				"-p", `{"status":{"conditions":[{"type":"example.com/blue","status":"False"}]}}`)
			waitFor(t, 30*time.Second, "blue not ready again", func() (bool, error) {
				p := getPod(t, cl, "blue")
				return !podIsReady(p), nil
			})
			time.Sleep(12 * time.Second) // past a status sync of the agent
			p := getPod(t, cl, "blue")
			found := false
			for _, cd := range p.Status.Conditions {
				found = found || cd.Type == "example.com/blue" && cd.Status == corev1.ConditionFalse
			}
			if !found || podIsReady(p) {
				t.Errorf("after the agent's status sync: %+v", p.Status.Conditions)
			}
		})

		t.Run("the pause image runs, and stops at SIGTERM", func(t *testing.T) {
			t.Parallel()
			kubectl(t, c, "run", "paused", "--image=registry.k8s.io/pause:3.10.2")
			waitPodReady(t, cl, "paused", 30*time.Second)
			start := time.Now()
			kubectl(t, c, "delete", "pod", "paused", "--grace-period=30")
			// pause exits 0 at SIGTERM: the deletion does not wait out the
			// grace period.
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("deleting the pause Pod took %s", d)
			}
		})

		t.Run("a liveness probe that cannot run restarts the container", func(t *testing.T) {
			t.Parallel()
			applyYAML(t, c, `apiVersion: v1
kind: Pod
metadata: {name: badprobe}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.36
    command: [sleep, "3600"]
    livenessProbe:
      exec: {command: [no-such-command]}
      periodSeconds: 1
      failureThreshold: 1
`)
			waitFor(t, 40*time.Second, "a restart for the failing liveness probe", func() (bool, error) {
				p := getPod(t, cl, "badprobe")
				return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1, fmt.Errorf("%+v", p.Status.ContainerStatuses)
			})
			waitFor(t, 10*time.Second, "events explaining it", func() (bool, error) {
				out := kubectl(t, c, "get", "events", "--field-selector", "involvedObject.name=badprobe")
				return strings.Contains(out, "Liveness probe failed") && strings.Contains(out, "no-such-command") &&
					strings.Contains(out, "failed liveness probe, will be restarted"), fmt.Errorf("events:\n%s", out)
			})
		})

		t.Run("CoreDNS reloads its edited ConfigMap", func(t *testing.T) {
			t.Parallel()
			// The reload plugin re-reads the Corefile every 30 s (plus
			// jitter) once the kubelet has updated the volume.
			cm, err := cl.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			hosts := "ready\n    hosts {\n       10.96.77.77 reload-check.cluster.local\n       fallthrough\n    }\n"
			edited := strings.Replace(cm.Data["Corefile"], "ready\n", hosts, 1)
			if edited == cm.Data["Corefile"] {
				t.Fatalf("no ready line in the Corefile:\n%s", edited)
			}
			cm.Data["Corefile"] = edited
			if _, err := cl.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			dns := st.Nodes[1]
			waitFor(t, 75*time.Second, "CoreDNS answering from the edited Corefile", func() (bool, error) {
				out, err := nodeExec(t, c, dns.Name, "dig", "+short", "+time=1", "+tries=1", "@"+cluster.DefaultClusterDNS, "reload-check.cluster.local")
				return strings.TrimSpace(out) == "10.96.77.77", fmt.Errorf("%v: %q", err, out)
			})
		})

		t.Run("the image's stop signal", func(t *testing.T) {
			t.Parallel()
			// nginx stops gracefully on SIGQUIT, its image's STOPSIGNAL.
			kubectl(t, c, "run", "nginx", "--image=nginx:1.27")
			waitPodReady(t, cl, "nginx", 30*time.Second)
			lctx, cancel := context.WithTimeout(ctx, 40*time.Second)
			defer cancel()
			logs := kubectlCmd(lctx, t, c, "logs", "-f", "nginx")
			var out syncBuffer
			logs.Stdout, logs.Stderr = &out, &out
			if err := logs.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			kubectl(t, c, "delete", "pod", "nginx", "--wait=false")
			logs.Wait()
			if !strings.Contains(out.String(), "signal 3 (SIGQUIT) received, shutting down") {
				t.Errorf("nginx did not get SIGQUIT:\n%s", out.String())
			}
		})

		t.Run("graceful termination: ready, then serving and terminating", func(t *testing.T) {
			t.Parallel()
			applyYAML(t, c, `apiVersion: v1
kind: Pod
metadata: {name: leaving, labels: {app: leaving}}
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [netexec, --http-port=8080]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
    lifecycle:
      preStop:
        sleep: {seconds: 4}
---
apiVersion: v1
kind: Service
metadata: {name: leaving}
spec:
  selector: {app: leaving}
  ports: [{port: 80, targetPort: 8080}]
`)
			pod := waitPodReady(t, cl, "leaving", 30*time.Second)
			ip := pod.Status.PodIP
			waitFor(t, 15*time.Second, "endpoint ready", func() (bool, error) {
				e, err := sliceEndpoint(cl, "leaving", ip)
				return e != nil && isTrue(e.Conditions.Ready) && isTrue(e.Conditions.Serving) && !isTrue(e.Conditions.Terminating), err
			})
			start := time.Now()
			if err := cl.CoreV1().Pods("default").Delete(ctx, "leaving", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 4*time.Second, "endpoint serving and terminating during preStop", func() (bool, error) {
				e, err := sliceEndpoint(cl, "leaving", ip)
				if e == nil {
					return false, err
				}
				return !isTrue(e.Conditions.Ready) && isTrue(e.Conditions.Serving) && isTrue(e.Conditions.Terminating), fmt.Errorf("%+v", e.Conditions)
			})
			waitFor(t, 25*time.Second, "the pod gone", func() (bool, error) {
				_, err := cl.CoreV1().Pods("default").Get(ctx, "leaving", metav1.GetOptions{})
				return apierrors.IsNotFound(err), err
			})
			// Gone once it has stopped, not at the end of its 20 s grace.
			if d := time.Since(start); d < 4*time.Second || d > 12*time.Second {
				t.Errorf("pod gone after %s, want after its 4 s preStop hook and well before its 20 s grace period", d)
			}
			waitFor(t, 10*time.Second, "endpoint removed", func() (bool, error) {
				e, err := sliceEndpoint(cl, "leaving", ip)
				return e == nil && err == nil, err
			})
		})
	})

	// The node's Ready pods as the API reports them: IP, restart counts
	// and container IDs, which an agent that restarts must keep (pods
	// crash-looping on purpose change on their own; a container with
	// stdin or a terminal is held by its agent, and runs again).
	podsOn := func(t *testing.T, node string) map[string]string {
		pods, err := cl.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range pods.Items {
			interactive := slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Stdin || c.TTY })
			// Pods that restart by design (a crash loop, a failing
			// liveness probe) change on their own; a pod that never
			// restarted must keep a restart count of 0.
			restarting := slices.ContainsFunc(p.Status.ContainerStatuses, func(cs corev1.ContainerStatus) bool { return cs.RestartCount > 0 })
			if p.DeletionTimestamp != nil || !podIsReady(&p) || interactive || restarting {
				continue
			}
			v := p.Status.PodIP
			for _, cs := range p.Status.ContainerStatuses {
				v += fmt.Sprintf(" %s:%d:%s", cs.Name, cs.RestartCount, cs.ContainerID)
			}
			out[p.Namespace+"/"+p.Name] = v
		}
		return out
	}
	// podStory tells why pod (namespace/name) is not as it was: its
	// state and what the node agents logged about it.
	podStory := func(key string) string {
		ns, name, _ := strings.Cut(key, "/")
		var b strings.Builder
		if p, err := cl.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			fmt.Fprintf(&b, "\n%v", err)
		} else {
			fmt.Fprintf(&b, "\nphase %s deleting %v ip %s conditions %+v", p.Status.Phase, p.DeletionTimestamp, p.Status.PodIP, p.Status.Conditions)
			for _, cs := range p.Status.ContainerStatuses {
				fmt.Fprintf(&b, "\n%s restarts %d ready %v state %+v", cs.Name, cs.RestartCount, cs.Ready, cs.State)
			}
		}
		if evs, err := cl.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name}); err == nil {
			for _, e := range evs.Items {
				fmt.Fprintf(&b, "\nevent %s %s ×%d: %s", e.LastTimestamp.Format(time.TimeOnly), e.Reason, e.Count, e.Message)
			}
		}
		var lines []string
		logs, _ := filepath.Glob(filepath.Join(paths{dir}.logs(), nodeAgentsName+".log*"))
		slices.Reverse(logs) // the oldest rotated file first, the current one last
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			for _, line := range strings.Split(string(data), "\n") {
				if strings.Contains(line, name) {
					lines = append(lines, line)
				}
			}
		}
		for _, line := range lines[max(0, len(lines)-40):] {
			fmt.Fprintf(&b, "\n%s", line)
		}
		return b.String()
	}
	nodeReady := func(node string) (corev1.ConditionStatus, []corev1.Taint) {
		n, err := cl.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return corev1.ConditionUnknown, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status, n.Spec.Taints
			}
		}
		return corev1.ConditionUnknown, n.Spec.Taints
	}
	hasTaint := func(taints []corev1.Taint, key string, effect corev1.TaintEffect) bool {
		return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
	}

	t.Run("a stopped node agent: NotReady, tainted, pods evicted as upstream; started again, it adopts its pods", func(t *testing.T) {
		node := ""
		for _, p := range webPods.Items {
			node = p.Spec.NodeName // a node with a web pod
		}
		// A pod that tolerates the unreachable taint for 2 s only:
		// the taint manager evicts it (the others tolerate 300 s, as
		// the DefaultTolerationSeconds admission plugin sets).
		applyYAML(t, c, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: evictee}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  tolerations: [{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}]
  containers: [{name: c, image: busybox:1.36, command: [sleep, "3600"]}]
`, node))
		waitPodReady(t, cl, "evictee", 60*time.Second)
		before := podsOn(t, node)
		lease := func() time.Time {
			l, err := cl.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil {
				t.Fatalf("lease of %s: %v", node, err)
			}
			return l.Spec.RenewTime.Time
		}
		if err := c.StopNodeAgent(node); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		t.Cleanup(func() { c.StartNodeAgent(node) })
		// The kubelet endpoint closes at once.
		waitFor(t, 10*time.Second, "the kubelet endpoint of "+node+" closed", func() (bool, error) {
			_, err := kubectlErr(t, c, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/healthz")
			return err != nil, nil
		})
		renewed := lease()
		// NotReady once the node-lifecycle controller's grace period
		// (upstream's default, 50 s) has passed without a heartbeat,
		// with the unreachable taints.
		waitFor(t, 90*time.Second, node+" NotReady and tainted unreachable", func() (bool, error) {
			st, taints := nodeReady(node)
			return st == corev1.ConditionUnknown && hasTaint(taints, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) &&
				hasTaint(taints, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), fmt.Errorf("Ready=%s taints=%v", st, taints)
		})
		if d := time.Since(stopped); d < 35*time.Second {
			t.Errorf("NotReady %s after the agent stopped, before the grace period", d)
		}
		if r := lease(); !r.Equal(renewed) {
			t.Errorf("the Lease was renewed (%s → %s) while the agent was stopped", renewed, r)
		}
		// Its pods are no longer Ready, and leave the EndpointSlices'
		// ready endpoints; their containers go on running.
		for _, p := range webPods.Items {
			if p.Spec.NodeName != node {
				continue
			}
			waitFor(t, 30*time.Second, p.Name+" not ready in the EndpointSlice", func() (bool, error) {
				ep, err := sliceEndpoint(cl, "web", p.Status.PodIP)
				return err == nil && ep != nil && !isTrue(ep.Conditions.Ready), err
			})
			if out, err := nodeExec(t, c, st.Nodes[0].Name, "curl", "-sS", "-m", "2", "http://"+p.Status.PodIP+":8080/hostname"); err != nil || out != p.Name {
				t.Errorf("%s stopped serving with its node's agent: %v %q", p.Name, err, out)
			}
		}
		waitFor(t, 30*time.Second, "evictee evicted (deleted, Terminating while the agent is away)", func() (bool, error) {
			p, err := cl.CoreV1().Pods("default").Get(ctx, "evictee", metav1.GetOptions{})
			return err == nil && p.DeletionTimestamp != nil, err
		})
		if err := c.StartNodeAgent(node); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, node+" Ready again, untainted", func() (bool, error) {
			st, taints := nodeReady(node)
			return st == corev1.ConditionTrue && !hasTaint(taints, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), fmt.Errorf("Ready=%s taints=%v", st, taints)
		})
		waitFor(t, 30*time.Second, "the evicted pod gone", func() (bool, error) {
			_, err := cl.CoreV1().Pods("default").Get(ctx, "evictee", metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		})
		delete(before, "default/evictee")
		waitFor(t, 60*time.Second, "the node's pods Ready again, adopted (same IPs, restart counts, containers)", func() (bool, error) {
			after := podsOn(t, node) // Ready pods only
			for k, v := range before {
				if after[k] != v {
					return false, fmt.Errorf("%s: %q, was %q%s", k, after[k], v, podStory(k))
				}
			}
			return true, nil
		})
		// Another writer marks a pod not Ready, as the node-lifecycle
		// controller does to a pod it sees change while the node is
		// NotReady in its cache: the agent writes its own status back,
		// as the kubelet's status manager does.
		for _, p := range webPods.Items {
			if p.Spec.NodeName != node {
				continue
			}
			cur := getPod(t, cl, p.Name)
			for i := range cur.Status.Conditions {
				if cur.Status.Conditions[i].Type == corev1.PodReady {
					cur.Status.Conditions[i].Status, cur.Status.Conditions[i].Reason = corev1.ConditionFalse, "NodeNotReady"
				}
			}
			if _, err := cl.CoreV1().Pods("default").UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, p.Name+" Ready again after another writer marked it not Ready", func() (bool, error) {
				return podIsReady(getPod(t, cl, p.Name)), nil
			})
			break
		}
	})

	t.Run("a killed node agent is restarted and adopts its pods without a flap", func(t *testing.T) {
		var s Status
		if err := readJSON(paths{dir}.status(), &s); err != nil {
			t.Fatal(err)
		}
		agents, _ := s.Component(nodeAgentsName)
		before := map[string]map[string]string{}
		for _, n := range st.Nodes {
			before[n.Name] = podsOn(t, n.Name)
		}
		// Every change to web's EndpointSlices while the agents
		// restart: there must be none.
		w, err := cl.DiscoveryV1().EndpointSlices("default").Watch(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=web"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		drain := func() int {
			n := 0
			for {
				select {
				case <-w.ResultChan():
					n++
				case <-time.After(time.Second):
					return n
				}
			}
		}
		drain() // the initial ADDED events
		if err := syscall.Kill(agents.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the supervisor restarting the agents", func() (bool, error) {
			var s Status
			if err := readJSON(paths{dir}.status(), &s); err != nil {
				return false, err
			}
			now, _ := s.Component(nodeAgentsName)
			return now.PID != 0 && now.PID != agents.PID && now.State == StateHealthy, fmt.Errorf("%+v", now)
		})
		time.Sleep(5 * time.Second) // the agents adopt and report
		for _, n := range st.Nodes {
			after := podsOn(t, n.Name)
			for k, v := range before[n.Name] {
				if after[k] != v {
					t.Errorf("%s on %s: %q after the restart, was %q", k, n.Name, after[k], v)
				}
			}
		}
		if n := drain(); n > 0 {
			t.Errorf("web's EndpointSlices changed %d times while the agents restarted", n)
		}
		for _, p := range webPods.Items {
			out, err := nodeExec(t, c, st.Nodes[1].Name, "curl", "-sS", "-m", "2", "http://"+p.Status.PodIP+":8080/hostname")
			if err != nil || out != p.Name {
				t.Errorf("%s at %s: %v %q", p.Name, p.Status.PodIP, err, out)
			}
		}
		// kubectl logs and exec reach the adopted containers.
		if out := kubectl(t, c, "exec", webPods.Items[0].Name, "--", "echo", "adopted"); strings.TrimSpace(out) != "adopted" {
			t.Errorf("exec in an adopted container: %q", out)
		}
		// The end of an adopted container is seen, with its exit code:
		// killed (as by the OOM killer), it is restarted.
		victim := getPod(t, cl, webPods.Items[0].Name)
		id := strings.TrimPrefix(victim.Status.ContainerStatuses[0].ContainerID, "runc://")
		restarts := victim.Status.ContainerStatuses[0].RestartCount
		if out, err := exec.Command("runc", "--root", filepath.Join(paths{dir}.node(victim.Spec.NodeName), "runc"), "kill", id, "KILL").CombinedOutput(); err != nil {
			t.Fatalf("runc kill %s: %v %s", id, err, out)
		}
		waitFor(t, 60*time.Second, victim.Name+" restarted after it was killed", func() (bool, error) {
			p := getPod(t, cl, victim.Name)
			cs := p.Status.ContainerStatuses[0]
			return cs.RestartCount == restarts+1 && cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 137 && podIsReady(p), fmt.Errorf("%+v", cs)
		})
	})

	t.Run("delete leaves nothing behind", func(t *testing.T) {
		if err := p.Delete(ctx, name); err != nil {
			t.Fatal(err)
		}
		deleted = true
		assertNoLeaks(t, dir, st)
	})
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
