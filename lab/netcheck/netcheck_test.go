package netcheck

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// hostDialer dials from this process's network namespace.
type hostDialer struct{}

func (hostDialer) DialFrom(ctx context.Context, network, local, address string) (net.Conn, error) {
	var d net.Dialer
	if local != "" {
		var err error
		if strings.HasPrefix(network, "udp") {
			d.LocalAddr, err = net.ResolveUDPAddr(network, local)
		} else {
			d.LocalAddr, err = net.ResolveTCPAddr(network, local)
		}
		if err != nil {
			return nil, err
		}
	}
	return d.DialContext(ctx, network, address)
}

func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, p := hostPort(t, c.LocalAddr().String())
		c.Close()
		return p
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, p := hostPort(t, l.Addr().String())
	l.Close()
	return p
}

func TestProbe(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		w.Write([]byte("web-7d9f\n"))
	}))
	defer web.Close()
	webHost, webPort := hostPort(t, web.Listener.Addr().String())

	// Accepts, then never answers.
	silent, _ := net.Listen("tcp4", "127.0.0.1:0")
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, silentPort := hostPort(t, silent.Addr().String())

	// Accepts, reads the request, closes without an answer (curl: "Empty
	// reply from server").
	closing, _ := net.Listen("tcp4", "127.0.0.1:0")
	defer closing.Close()
	go func() {
		for {
			c, err := closing.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 512))
			c.Close()
		}
	}()
	_, closingPort := hostPort(t, closing.Addr().String())

	udp, _ := net.ListenPacket("udp4", "127.0.0.1:0")
	defer udp.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			if string(buf[:n]) == "hostname\n" {
				udp.WriteTo([]byte("udp-pod\n"), from)
			}
		}
	}()
	_, udpPort := hostPort(t, udp.LocalAddr().String())
	mute, _ := net.ListenPacket("udp4", "127.0.0.1:0")
	defer mute.Close()
	_, mutePort := hostPort(t, mute.LocalAddr().String())

	dns := startDNS(t, map[string]string{"web.shop.svc.cluster.local.": "10.96.4.2"})
	_, dnsPort := hostPort(t, dns)
	srcPort := closedPort(t, "udp")

	short := 300 * time.Millisecond
	for _, tc := range []struct {
		name     string
		p        Probe
		want     string
		wantBody string
	}{
		{"http answers", Probe{Protocol: "http", Host: webHost, Port: webPort, Path: "/hostname"}, Success, "web-7d9f"},
		{"an HTTP error status is an answer", Probe{Protocol: "http", Host: webHost, Port: webPort, Path: "/missing"}, Success, "not here"},
		{"http refused", Probe{Protocol: "http", Host: "127.0.0.1", Port: closedPort(t, "tcp")}, Refused, ""},
		{"http with no answer times out", Probe{Protocol: "http", Host: "127.0.0.1", Port: silentPort, Timeout: short}, Timeout, ""},
		{"http closed without an answer is an error", Probe{Protocol: "http", Host: "127.0.0.1", Port: closingPort}, Error, ""},
		{"tcp connects", Probe{Protocol: "tcp", Host: "127.0.0.1", Port: silentPort}, Success, ""},
		{"tcp refused", Probe{Protocol: "tcp", Host: "127.0.0.1", Port: closedPort(t, "tcp")}, Refused, ""},
		{"udp answers", Probe{Protocol: "udp", Host: "127.0.0.1", Port: udpPort}, Success, "udp-pod"},
		{"udp without an answer times out", Probe{Protocol: "udp", Host: "127.0.0.1", Port: mutePort, Timeout: short}, Timeout, ""},
		{"udp to a closed port is refused", Probe{Protocol: "udp", Host: "127.0.0.1", Port: closedPort(t, "udp"), Timeout: short}, Refused, ""},
		{"dns answers", Probe{Protocol: "dns", Host: "127.0.0.1", Port: dnsPort, Query: "web.shop.svc.cluster.local"}, Success, "10.96.4.2"},
		{"dns from a fixed source port", Probe{Protocol: "dns", Host: "127.0.0.1", Port: dnsPort, Query: "web.shop.svc.cluster.local", SourcePort: srcPort}, Success, "10.96.4.2"},
		{"dns NXDOMAIN", Probe{Protocol: "dns", Host: "127.0.0.1", Port: dnsPort, Query: "nope.shop.svc.cluster.local"}, DNSFailure, ""},
		{"dns with no server times out", Probe{Protocol: "dns", Host: "127.0.0.1", Port: mutePort, Query: "web", Timeout: short}, Timeout, ""},
		{"an unknown protocol is an error", Probe{Protocol: "sctp", Host: "127.0.0.1", Port: 1}, Error, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.p.Run(context.Background(), hostDialer{})
			if r.Outcome != tc.want || r.Body != tc.wantBody {
				t.Errorf("outcome %q body %q (detail %q), want %q %q", r.Outcome, r.Body, r.Detail, tc.want, tc.wantBody)
			}
			if tc.p.Port == closingPort && r.Detail != NoHTTPAnswer {
				t.Errorf("detail %q, want %q (as FromShell says of curl's exit 52)", r.Detail, NoHTTPAnswer)
			}
			if tc.p.Timeout > 0 && r.Duration > tc.p.Timeout+time.Second {
				t.Errorf("took %v with a timeout of %v", r.Duration, tc.p.Timeout)
			}
		})
	}
}

// startDNS answers A queries for names from a map (NXDOMAIN otherwise).
func startDNS(t *testing.T, names map[string]string) string {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			var q dnsmessage.Message
			if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 {
				continue
			}
			resp := dnsmessage.Message{Header: dnsmessage.Header{ID: q.Header.ID, Response: true}, Questions: q.Questions}
			if ip, ok := names[q.Questions[0].Name.String()]; ok {
				var a [4]byte
				copy(a[:], net.ParseIP(ip).To4())
				resp.Answers = []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: q.Questions[0].Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5},
					Body: &dnsmessage.AResource{A: a}}}
			} else {
				resp.Header.RCode = dnsmessage.RCodeNameError
			}
			b, _ := resp.Pack()
			c.WriteTo(b, from)
		}
	}()
	return c.LocalAddr().String()
}
