//go:build linux

package embedded

import (
	"fmt"
	"net/netip"
	"testing"
)

// What `ip -j route show` prints in a load balancer's namespace: its
// subnet, a multipath route, a blackhole and a single route.
func TestParseRoutes(t *testing.T) {
	out := `[{"dst":"172.30.9.0/24","dev":"eth0","protocol":"kernel","scope":"link","prefsrc":"172.30.9.254","flags":[]},` +
		`{"dst":"172.30.9.225","flags":[],"nexthops":[{"gateway":"172.30.9.3","dev":"eth0","weight":1,"flags":[]},{"gateway":"172.30.9.4","dev":"eth0","weight":1,"flags":[]}]},` +
		`{"type":"blackhole","dst":"172.30.9.226","flags":[]},{"dst":"172.30.9.227","gateway":"172.30.9.3","dev":"eth0","flags":[]}]`
	got, err := parseRoutes([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"172.30.9.225": "[172.30.9.3 172.30.9.4]", "172.30.9.226": "[]", "172.30.9.227": "[172.30.9.3]"}
	if len(got) != len(want) {
		t.Errorf("routes %v", got)
	}
	for a, w := range want {
		if g := fmt.Sprint(got[netip.MustParseAddr(a)]); g != w {
			t.Errorf("%s → %s, want %s", a, g, w)
		}
	}
	if _, err := parseRoutes([]byte("not json")); err == nil {
		t.Error("garbage read without an error")
	}
}
