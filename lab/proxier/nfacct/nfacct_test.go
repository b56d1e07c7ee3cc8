//go:build linux

package nfacct

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

func attr(typ uint16, data []byte) []byte {
	b := make([]byte, 4, 4+len(data)+3)
	binary.NativeEndian.PutUint16(b, uint16(4+len(data)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func TestDecode(t *testing.T) {
	nfgen := []byte{0, 0, 0, 0}
	for _, tc := range []struct {
		name    string
		msg     []byte
		want    Counter
		wantErr string
	}{
		{"counter", concat(nfgen, attr(attrName, []byte("ct_state_invalid_dropped_pkts\x00")), attr(attrPackets, u64(7)), attr(attrBytes, u64(420))),
			Counter{Name: "ct_state_invalid_dropped_pkts", Packets: 7, Bytes: 420}, ""},
		{"net byte order flag", concat(nfgen, attr(attrName, []byte("a\x00")), attr(attrPackets|0x4000, u64(1))), Counter{Name: "a", Packets: 1}, ""},
		{"short", []byte{0, 0}, Counter{}, "short message"},
		{"no name", concat(nfgen, attr(attrPackets, u64(1))), Counter{}, "no name"},
		{"bad length", concat(nfgen, []byte{40, 0, 1, 0, 'a', 0, 0, 0}), Counter{}, "bad attribute length"},
		{"bad packets", concat(nfgen, attr(attrName, []byte("a\x00")), attr(attrPackets, []byte{1, 2})), Counter{}, "packets attribute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode(tc.msg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *got != tc.want {
				t.Errorf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestNetlinkKernel creates and reads counters in a network namespace of
// its own.
func TestNetlinkKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("kernel test (-short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	name := fmt.Sprintf("svpx-nfacct-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del: %v: %s", err, out)
		}
	})
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n, err := NewAt(h)
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("kernel without nfacct: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	if _, err := n.Get(CTStateInvalidDropped); !errors.Is(err, ErrObjectNotFound) {
		t.Fatalf("Get of a missing counter: %v, want ErrObjectNotFound", err)
	}
	for range 2 { // the second Ensure finds it
		for _, c := range Counters {
			if err := n.Ensure(c); err != nil {
				t.Fatalf("Ensure %s: %v", c, err)
			}
		}
	}
	c, err := n.Get(LocalhostNodePortsAccepted)
	if err != nil {
		t.Fatal(err)
	}
	if *c != (Counter{Name: LocalhostNodePortsAccepted}) {
		t.Errorf("new counter = %+v", *c)
	}
	if err := n.Ensure(strings.Repeat("x", MaxLength+1)); !errors.Is(err, ErrNameExceedsMaxLength) {
		t.Errorf("long name: %v", err)
	}
	if err := n.Ensure(""); !errors.Is(err, ErrEmptyName) {
		t.Errorf("empty name: %v", err)
	}
}
