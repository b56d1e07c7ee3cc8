//go:build linux

package nftables

import (
	"context"
	"strings"
	"testing"
)

// TestRenderTransactionCommands checks that every line of the rendered
// transaction is one nft command that names its object, as the first sync
// pipes it into "nft -f": running the transaction on knftables.Fake (which
// sets handles on some of the objects it is given) must not leak handles
// into the text.
func TestRenderTransactionCommands(t *testing.T) {
	r, err := Render(context.Background(), nil, upstreamConfig(t), loadSnapshot(t, "../testdata/upstream/overall.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	verbs := []string{"add ", "delete ", "flush "}
	for i, line := range strings.Split(strings.TrimSuffix(r.Transaction, "\n"), "\n") {
		if !hasAnyPrefix(line, verbs) {
			t.Errorf("line %d is not a command: %q", i+1, line)
		}
		if strings.Contains(line, " handle ") {
			t.Errorf("line %d deletes by handle: %q", i+1, line)
		}
		if n := strings.Count(line, " ip kube-proxy "); n != 1 {
			t.Errorf("line %d holds %d commands: %q", i+1, n, line)
		}
	}
	for _, proto := range []string{"tcp", "udp", "sctp"} {
		want := "delete counter ip kube-proxy localhost-nodeport-rejected-" + proto + "\n"
		if !strings.Contains(r.Transaction, want) {
			t.Errorf("transaction lacks %q", want)
		}
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
