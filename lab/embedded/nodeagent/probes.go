//go:build linux

package nodeagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe runs the container's startup, liveness and readiness probes with
// the kubelet's semantics: readiness and liveness wait for startup;
// failureThreshold failures in a row flip readiness or restart the
// container; successThreshold successes make it ready again.
func (c *containerRun) probe(ctx context.Context, rc *runningContainer) {
	if c.init && !c.sidecar() {
		return
	}
	started := make(chan struct{})
	if c.spec.StartupProbe == nil {
		close(started)
	} else {
		go c.runProbe(ctx, c.spec.StartupProbe, "Startup", func(ok bool) bool {
			if ok {
				c.mu.Lock()
				c.started = true
				c.mu.Unlock()
				c.pod.changed()
				close(started)
				return false // stop probing
			}
			c.restartForProbe("Startup")
			return false
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-started:
		}
		if p := c.spec.LivenessProbe; p != nil {
			go c.runProbe(ctx, p, "Liveness", func(ok bool) bool {
				if !ok {
					c.restartForProbe("Liveness")
					return false
				}
				return true
			})
		}
		if p := c.spec.ReadinessProbe; p != nil {
			c.runProbe(ctx, p, "Readiness", func(ok bool) bool {
				c.mu.Lock()
				changed := c.ready != ok
				c.ready = ok
				c.mu.Unlock()
				if changed {
					c.pod.changed()
				}
				return true
			})
		}
	}()
}

func (c *containerRun) restartForProbe(kind string) {
	c.pod.event(corev1.EventTypeNormal, "Killing", "Container %s failed %s probe, will be restarted", c.spec.Name, strings.ToLower(kind))
	if id := c.runningID(); id != "" {
		c.pod.p.rt.kill(context.Background(), id, c.stopSignal())
		time.AfterFunc(probeGrace(c.pod.pod), func() { c.pod.p.rt.kill(context.Background(), id, syscall.SIGKILL) })
	}
}

func probeGrace(pod *corev1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// runProbe probes every period; result is called with the thresholded
// outcome whenever it is decided, and probing stops when it returns false.
func (c *containerRun) runProbe(ctx context.Context, p *corev1.Probe, kind string, result func(ok bool) bool) {
	period := secs(p.PeriodSeconds, 10)
	timeout := secs(p.TimeoutSeconds, 1)
	failureThreshold := int(max(p.FailureThreshold, 1))
	if p.FailureThreshold == 0 {
		failureThreshold = 3
	}
	successThreshold := int(max(p.SuccessThreshold, 1))
	select {
	case <-ctx.Done():
		return
	case <-time.After(secs(p.InitialDelaySeconds, 0)):
	}
	fails, successes := 0, 0
	for {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := c.probeOnce(pctx, &p.ProbeHandler, timeout)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			fails++
			successes = 0
			c.pod.event(corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %v", kind, err)
			if fails >= failureThreshold {
				if !result(false) {
					return
				}
				fails = 0
			}
		} else {
			successes++
			fails = 0
			if successes >= successThreshold {
				if !result(true) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

func secs(s int32, def int) time.Duration {
	if s <= 0 {
		return time.Duration(def) * time.Second
	}
	return time.Duration(s) * time.Second
}

// probeOnce runs one check of handler against the container.
func (c *containerRun) probeOnce(ctx context.Context, h *corev1.ProbeHandler, timeout time.Duration) error {
	r := c.pod
	r.mu.Lock()
	netns, ip := r.netns, r.ip.String()
	r.mu.Unlock()
	switch {
	case h.Exec != nil:
		id := c.runningID()
		if id == "" {
			return fmt.Errorf("container not running")
		}
		out := &probeOutput{}
		code, err := r.p.rt.exec(ctx, id, h.Exec.Command, false, nil, out, out)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("command %q exited with %d: %s", strings.Join(h.Exec.Command, " "), code, strings.TrimSpace(out.String()))
		}
		return nil
	case h.HTTPGet != nil:
		port, err := c.resolvePort(h.HTTPGet.Port)
		if err != nil {
			return err
		}
		host, err := probeHost(h.HTTPGet.Host, ip)
		if err != nil {
			return err
		}
		scheme := strings.ToLower(string(h.HTTPGet.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), h.HTTPGet.Path)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "kube-probe/1.37")
		for _, hd := range h.HTTPGet.HTTPHeaders {
			req.Header.Set(hd.Name, hd.Value)
		}
		// The kubelet probes from the node.
		client := &http.Client{Timeout: timeout, Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return dialIn(ctx, r.p.cfg.Netns, network, addr)
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet does not verify probe targets
			DisableKeepAlives: true,
		}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 10*1024))
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe failed with statuscode: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	case h.TCPSocket != nil:
		port, err := c.resolvePort(h.TCPSocket.Port)
		if err != nil {
			return err
		}
		host, err := probeHost(h.TCPSocket.Host, ip)
		if err != nil {
			return err
		}
		conn, err := dialIn(ctx, r.p.cfg.Netns, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case h.GRPC != nil:
		conn, err := dialIn(ctx, netns, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(h.GRPC.Port))))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return fmt.Errorf("probe has no handler")
}

// resolvePort turns a named port into the container's port number.
func (c *containerRun) resolvePort(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("port %q not found in container %s", p.StrVal, c.spec.Name)
}

// runHandler runs a lifecycle hook.
func (c *containerRun) runHandler(ctx context.Context, id string, h *corev1.LifecycleHandler) error {
	switch {
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
		return nil
	case h.Exec != nil || h.HTTPGet != nil || h.TCPSocket != nil:
		return c.probeOnce(ctx, &corev1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket}, 30*time.Second)
	}
	_ = id
	return nil
}

// probeHost is the address a probe or hook connects to: the Pod's IP
// unless host says otherwise. The kubelet resolves a host name with the
// node's resolver; the agent is root on the host, whose resolver and
// network are not the lab's, so it takes IP addresses (and localhost, the
// node's loopback) only and says so of a name.
func probeHost(host, podIP string) (string, error) {
	switch {
	case host == "":
		return podIP, nil
	case strings.EqualFold(host, "localhost"):
		return "127.0.0.1", nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return "", fmt.Errorf("host %q is a name: svclab's nodes probe IP addresses (and localhost) only; give the address", host)
	}
	return host, nil
}

// maxProbeOutput is how much of an exec probe's output is kept, as the
// kubelet keeps (pkg/probe/exec: 10 KiB): a probe that prints without end
// costs the agent, root on the host, no more memory than that.
const maxProbeOutput = 10 << 10

// probeOutput keeps the first maxProbeOutput bytes written to it and
// discards the rest, without failing the command.
type probeOutput struct{ bytes.Buffer }

func (o *probeOutput) Write(p []byte) (int, error) {
	if room := maxProbeOutput - o.Len(); room > 0 {
		o.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
