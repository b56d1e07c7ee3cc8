package proxierctl

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/proxier/faults"
	"github.com/svclab/svclab/lab/views/viewstest"
)

func TestAddr(t *testing.T) {
	if Addr() != "127.0.0.1:10249" {
		t.Errorf("Addr() = %s", Addr())
	}
}

// Mode reads /proxyMode and refuses a mode the lab does not know;
// SetFaults posts the typed patch, only the switches it sets.
func TestModeAndFaults(t *testing.T) {
	ctx := context.Background()
	c := viewstest.New("lab", "")
	for _, tc := range []struct{ answer, want, err string }{
		{"", "nftables", ""},
		{"iptables", "iptables", ""},
		{"ipvs", "", `runs in mode "ipvs"`},
	} {
		c.SetMode(tc.answer)
		got, err := Mode(ctx, c, "lab-worker")
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("answer %q: %q %v", tc.answer, got, err)
		}
	}
	on := true
	if err := SetFaults(ctx, c, "lab-worker", faults.Patch{StopSyncing: &on}); err != nil {
		t.Fatal(err)
	}
	if got := c.Patches(); !slices.Equal(got, []string{`lab-worker {"stopSyncing":true}`}) {
		t.Errorf("patches %q", got)
	}
	if _, err := Mode(ctx, c, "nope"); err == nil {
		t.Error("a node that is not there answered")
	}
}
