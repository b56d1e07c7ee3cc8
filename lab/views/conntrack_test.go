package views

import (
	"testing"

	"github.com/svclab/svclab/lab/netcheck"
)

func TestParseConntrack(t *testing.T) {
	out := `tcp      6 119 TIME_WAIT src=172.29.1.3 dst=10.96.38.171 sport=49108 dport=80 src=10.244.2.2 dst=172.29.1.3 sport=8080 dport=18832 [ASSURED] mark=0 use=1
tcp      6 431996 ESTABLISHED src=10.244.1.2 dst=10.96.0.1 sport=54162 dport=443 src=172.29.1.2 dst=10.244.1.2 sport=6443 dport=54162 [ASSURED] mark=0 use=1
udp      17 29 src=10.244.2.3 dst=10.96.0.10 sport=40000 dport=53 [UNREPLIED] src=10.244.0.2 dst=10.244.2.3 sport=53 dport=40000 mark=0 use=1
garbage`
	rows := parseConntrack(out, map[string]string{"10.96.38.171:80": "shop/web", "10.96.0.10:0": "kube-system/kube-dns"})
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	if r := rows[0]; r.Src != "172.29.1.3:49108" || r.Dst != "10.96.38.171:80" || r.Backend != "10.244.2.2:8080" || r.State != "TIME_WAIT" || r.TTL != 119 || r.Service != "shop/web" || r.Flags != "ASSURED" {
		t.Errorf("tcp row %+v", r)
	}
	if r := rows[1]; r.Proto != "udp" || r.State != "" || r.Backend != "10.244.0.2:53" || r.Flags != "UNREPLIED" {
		t.Errorf("udp row %+v", r)
	}
}

func TestParseNodeProbes(t *testing.T) {
	out := "@@P shop/web:80 0 21 web-7c7df4c59c-5xzf6\n@@P shop/web:8080 7 3 curl: (7) Failed to connect to 10.96.38.171 port 8080: Connection refused\n@@P shop/db:5432 28 1001 \n@@P shop/raw:81 52 4 curl: (52) Empty reply from server\n@@C\ntcp 6 1 CLOSE src=1.2.3.4\n"
	rs, ct := parseNodeProbes("n1", out)
	if len(rs) != 4 || rs[0].Outcome != "success" || rs[0].Backend != "web-7c7df4c59c-5xzf6" || rs[1].Outcome != "refused" || rs[2].Outcome != "timeout" || rs[2].Millis != 1001 {
		t.Errorf("probes %+v", rs)
	}
	// The panel reads an empty reply as the grader does: no answer of the
	// application's.
	if len(rs) == 4 && (rs[3].Outcome != netcheck.Error || rs[3].Detail != netcheck.NoHTTPAnswer || rs[3].Target != "shop/raw:81") {
		t.Errorf("empty reply %+v", rs[3])
	}
	if ct != "tcp 6 1 CLOSE src=1.2.3.4\n" {
		t.Errorf("conntrack part %q", ct)
	}
}
