package iptables

import (
	"strings"
	"testing"
)

// TestFactSheetExample checks the v1.37.2 iptables-restore lines quoted in
// the kube-proxy fact sheet for its demo Services.
func TestFactSheetExample(t *testing.T) {
	res := render(t, upstreamConfig(), decodeSnapshot(t, "demo.yaml", readFile(t, "../testdata/demo.yaml")), Options{})
	quoted := `-A KUBE-SERVICES -m comment --comment "demo/empty:http has no endpoints" -m tcp -p tcp -d 172.30.0.30 --dport 80 -j REJECT
-A KUBE-SERVICES -m comment --comment "demo/web:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 -j KUBE-SVC-XRY76EGRC3BSCIIJ
-A KUBE-SVC-XRY76EGRC3BSCIIJ -m comment --comment "demo/web:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
-A KUBE-SVC-XRY76EGRC3BSCIIJ -m comment --comment "demo/web:http -> 10.180.0.1:8080" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-2VBILYRCJMUY2CVJ
-A KUBE-SVC-XRY76EGRC3BSCIIJ -m comment --comment "demo/web:http -> 10.180.2.1:8080" -j KUBE-SEP-O6TLQBNTV5TAWV3U
-A KUBE-SEP-2VBILYRCJMUY2CVJ -m comment --comment demo/web:http -s 10.180.0.1 -j KUBE-MARK-MASQ
-A KUBE-SEP-2VBILYRCJMUY2CVJ -m comment --comment demo/web:http -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:8080
-A KUBE-NODEPORTS -m comment --comment demo/np-local:http -m tcp -p tcp --dport 30080 -j KUBE-EXT-ETUAL5I6IHWGXZR2
-A KUBE-EXT-ETUAL5I6IHWGXZR2 -m comment --comment "pod traffic for demo/np-local:http external destinations" -s 10.0.0.0/8 -j KUBE-SVC-ETUAL5I6IHWGXZR2
-A KUBE-EXT-ETUAL5I6IHWGXZR2 -m comment --comment "masquerade LOCAL traffic for demo/np-local:http external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
-A KUBE-EXT-ETUAL5I6IHWGXZR2 -m comment --comment "route LOCAL traffic for demo/np-local:http external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-ETUAL5I6IHWGXZR2
-A KUBE-EXT-ETUAL5I6IHWGXZR2 -j KUBE-SVL-ETUAL5I6IHWGXZR2
-A KUBE-SVL-ETUAL5I6IHWGXZR2 -m comment --comment "demo/np-local:http -> 10.180.0.2:8080" -j KUBE-SEP-5WAC6KFE2E2AAND3`
	lines := strings.Split(res.Restore, "\n")
	for _, want := range strings.Split(quoted, "\n") {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("missing line %q", want)
		}
	}
}
