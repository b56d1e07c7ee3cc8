package netcheck

import "testing"

func TestFromShell(t *testing.T) {
	for _, tc := range []struct {
		protocol string
		rc       int
		text     string
		want     string
		body     string
	}{
		{"http", 0, "web-a\n", Success, "web-a"},
		{"http", 7, "curl: (7) Failed to connect to 10.96.0.5 port 80 after 0 ms: Couldn't connect to server", Refused, ""},
		{"http", 28, "curl: (28) Connection timed out after 2002 milliseconds", Timeout, ""},
		{"http", 7, "curl: (7) Failed to connect to 10.96.0.5 port 80 after 0 ms: Connection refused", Refused, ""},
		{"http", 52, "curl: (52) Empty reply from server", Error, ""},
		{"http", 56, "curl: (56) Recv failure: Connection reset by peer", Refused, ""},
		{"http", 1, "wget: server returned error: HTTP/1.1 404 Not Found", Success, "wget: server returned error: HTTP/1.1 404 Not Found"},
		{"http", 1, "wget: bad address 'web'", DNSFailure, ""},
		{"http", 1, "wget: download timed out", Timeout, ""},
		{"http", 3, "", Error, ""},
		{"tcp", 124, "", Timeout, ""},
		{"tcp", 1, "bash: connect: Connection refused bash: line 1: /dev/tcp/10.96.0.5/80: Connection refused", Refused, ""},
		{"tcp", 1, "nc: can't connect to remote host (10.244.1.4): Connection refused", Refused, ""},
		{"udp", 0, "", Timeout, ""},
		{"udp", 0, "web-a", Success, "web-a"},
		{"dns", 0, "10.96.0.50", Success, "10.96.0.50"},
		{"dns", 0, "", DNSFailure, ""},
		{"dns", 9, ";; connection timed out; no servers could be reached", Timeout, ""},
		{"dns", 0, "Server: 10.96.0.10 Address: 10.96.0.10:53  Name: web.shop.svc.cluster.local Address: 10.96.0.50", Success, "Server: 10.96.0.10 Address: 10.96.0.10:53  Name: web.shop.svc.cluster.local Address: 10.96.0.50"},
		{"dns", 1, "Server: 10.96.0.10 Address: 10.96.0.10:53  ** server can't find web: NXDOMAIN", DNSFailure, ""},
	} {
		r := FromShell(tc.protocol, tc.rc, tc.text)
		if r.Outcome != tc.want || r.Body != tc.body {
			t.Errorf("FromShell(%s, %d, %q) = %s %q (%s), want %s %q", tc.protocol, tc.rc, tc.text, r.Outcome, r.Body, r.Detail, tc.want, tc.body)
		}
		if r.Outcome != Success && r.Detail == "" {
			t.Errorf("FromShell(%s, %d, %q): %s without a detail", tc.protocol, tc.rc, tc.text, r.Outcome)
		}
	}
}
