package agnhost

import (
	"bytes"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// Upstream's vectors (regression-issue-74839's tcp_test.go).
func TestChecksummer(t *testing.T) {
	for _, tc := range []struct {
		desc string
		data [][]byte
		want uint16
	}{
		{"empty", nil, 0xffff},
		{"1 byte", [][]byte{{0x55}}, 0xffaa},
		{"2 bytes", [][]byte{{0x55, 0x88}}, 0x77aa},
		{"3 bytes", [][]byte{{0x55, 0x88, 0x99}}, 0x7711},
		{"3 bytes / 1 at a time", [][]byte{{0x55}, {0x88}, {0x99}}, 0x7711},
		{"3 bytes / 2 1", [][]byte{{0x55, 0x88}, {0x99}}, 0x7711},
		{"simple packet", [][]byte{{
			0x7f, 0x00, 0x00, 0x01, 0x7f, 0x00, 0x00, 0x01, 0x00, 0x06, 0x00, 0x14,
			0x00, 0x50, 0x1f, 0x90, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
			0x00, 0x00, 0x50, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		}}, 0xff91},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var c checksummer
			for _, b := range tc.data {
				c.add(b)
			}
			if got := c.finalize(); got != tc.want {
				t.Errorf("finalize() = %#x, want %#x", got, tc.want)
			}
		})
	}
}

// An encoded segment decodes to itself, and its checksum verifies: the
// sum over the pseudo-header and the segment, checksum included, is zero.
func TestTCPSegmentRoundTrip(t *testing.T) {
	src, dst := net.ParseIP("10.244.1.7"), net.ParseIP("10.244.2.9")
	h := tcpHeader{SrcPort: 9000, DestPort: 40000, Seq: 1000, Ack: 2000, Flags: 5<<12 | tcpPSH | tcpACK, WindowSize: 512}
	seg := h.encode(src, dst, []byte("boom!!!"))
	got, data, err := decodeTCP(seg)
	if err != nil || !bytes.Equal(data, []byte("boom!!!")) || got.Seq != 1000 || got.Ack != 2000 || got.flagString() != "PSH ACK" {
		t.Fatalf("decoded %+v %q %v", got, data, err)
	}
	var c checksummer
	c.add(src.To4())
	c.add(dst.To4())
	c.add([]byte{0, 6, 0, byte(len(seg))})
	c.add(seg)
	if sum := c.finalize(); sum != 0 {
		t.Errorf("the checksum does not verify: %#x", sum)
	}
	if _, _, err := decodeTCP(seg[:10]); err == nil {
		t.Error("a 10-byte segment decoded")
	}
}

func TestBoomServerIPs(t *testing.T) {
	got := boomServerIPs([]string{"POD_IP=10.0.0.1", "POD_IPS=10.0.0.1,fd00::1"})
	if len(got) != 2 || got[1].String() != "fd00::1" {
		t.Errorf("POD_IPS first: %v", got)
	}
	if got := boomServerIPs([]string{"POD_IP=10.0.0.1"}); len(got) != 1 {
		t.Errorf("POD_IP alone: %v", got)
	}
	if got := boomServerIPs([]string{"POD_IP=nonsense"}); len(got) != 0 {
		t.Errorf("no address: %v", got)
	}
}

// On loopback (no NAT, no conntrack INVALID drop in between) the server
// sees the handshake, injects its segment, and the client's kernel, which
// gets it out of window, answers with an ACK, not an RST.
func TestBoomServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("boom-server needs a raw socket (root)")
	}
	h := start(t, func(e *env) { e.environ = func() []string { return []string{"POD_IP=127.0.0.1"} } }, "boom-server", "--port=0")
	addr := h.addr("tcp")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(h.stderr.String(), "boom packet injected") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	logs := h.stderr.String()
	if !strings.Contains(logs, "connection established") || !strings.Contains(logs, "boom packet injected") {
		t.Fatalf("no boom: %s", logs)
	}
	if strings.Contains(logs, "ERROR") {
		t.Errorf("an RST came back on loopback: %s", logs)
	}
}

func TestBoomServerNeedsAnAddress(t *testing.T) {
	h := start(t, func(e *env) { e.environ = func() []string { return nil } }, "boom-server", "--port=0")
	if code := h.wait(5 * time.Second); code != 1 || !strings.Contains(h.stderr.String(), "no valid IP") {
		t.Errorf("exit %d: %s", code, h.stderr.String())
	}
}
