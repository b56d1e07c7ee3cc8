//go:build linux

package daemon

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/events"
	"github.com/svclab/svclab/lab/proxier/nftables"
)

func TestCleanupIPTables(t *testing.T) {
	h := newHarness(t)
	run := newFakeIPTables()
	run.chains["filter"]["KUBE-FIREWALL"] = []string{"-A KUBE-FIREWALL -j DROP"}
	run.chains["filter"]["INPUT"] = []string{"-A INPUT -j KUBE-FIREWALL"}
	a := NewIPTablesApplier(iptablesConfig(t), run, nil)
	if _, err := a.Apply(context.Background(), h.snapshot(baseObjects), true); err != nil {
		t.Fatal(err)
	}
	if err := run.EnsureChain(context.Background(), "mangle", "KUBE-PROXY-CANARY"); err != nil {
		t.Fatal(err)
	}

	removed, err := CleanupIPTables(context.Background(), run)
	if err != nil || !removed {
		t.Fatalf("removed %v err %v", removed, err)
	}
	for table, chains := range run.chains {
		for c, rules := range chains {
			if ownedIPTablesChain(c) {
				t.Errorf("%s: chain %s left", table, c)
			}
			for _, r := range rules {
				if strings.Contains(r, "-j KUBE-") && !strings.Contains(r, "KUBE-FIREWALL") {
					t.Errorf("%s: jump left: %s", table, r)
				}
			}
		}
	}
	if _, ok := run.chains["filter"]["KUBE-FIREWALL"]; !ok || len(run.chains["filter"]["INPUT"]) != 1 {
		t.Error("kubelet's KUBE-FIREWALL was touched")
	}
	// Nothing left: a second cleanup is a no-op.
	if removed, err := CleanupIPTables(context.Background(), run); removed || err != nil {
		t.Errorf("second cleanup: %v %v", removed, err)
	}
}

func TestCleanupNFTables(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	if removed, err := CleanupNFTables(context.Background(), h.nft.Fake); err != nil || !removed {
		t.Fatalf("removed %v err %v", removed, err)
	}
	if h.nft.Table != nil {
		t.Error("table still there")
	}
	empty := knftables.NewFake(knftables.IPv4Family, nftables.Table)
	if removed, err := CleanupNFTables(context.Background(), empty); removed || err != nil {
		t.Errorf("no table: %v %v", removed, err)
	}
}
