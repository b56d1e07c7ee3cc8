package iptables

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mixedServices is a manifest of n Services of many shapes: ClusterIP,
// NodePort, NodePort with externalTrafficPolicy Local, LoadBalancer with
// source ranges, ClientIP affinity, two ports, and no endpoints.
func mixedServices(n int) string {
	var m strings.Builder
	for i := range n {
		name := fmt.Sprintf("svc%d", i)
		ip := fmt.Sprintf("172.30.%d.%d", i/250, i%250+1)
		spec := ""
		ports := fmt.Sprintf("[{name: p80, port: 80, protocol: TCP, nodePort: %d}]", 30000+i)
		status := ""
		switch i % 7 {
		case 0:
			ports = "[{name: p80, port: 80, protocol: TCP}]"
		case 1:
			spec = "type: NodePort"
		case 2:
			spec = "type: NodePort\n  externalTrafficPolicy: Local"
		case 3:
			spec = "type: LoadBalancer\n  loadBalancerSourceRanges: [203.0.113.0/25]"
			status = fmt.Sprintf("status: {loadBalancer: {ingress: [{ip: 198.51.%d.%d}]}}\n", i/250, i%250+1)
		case 4:
			spec = "sessionAffinity: ClientIP"
			ports = "[{name: p80, port: 80, protocol: TCP}]"
		case 5:
			ports = "[{name: p80, port: 80, protocol: TCP}, {name: p53, port: 53, protocol: UDP}]"
		case 6:
			ports = "[{name: p80, port: 80, protocol: TCP}]"
		}
		fmt.Fprintf(&m, "apiVersion: v1\nkind: Service\nmetadata: {namespace: ns, name: %s}\nspec:\n  clusterIP: %s\n  %s\n  ports: %s\n%s---\n", name, ip, spec, ports, status)
		if i%7 == 6 {
			continue // no endpoints
		}
		var eps []string
		for j := range 3 {
			node := "node-2"
			if j == 0 {
				node = testNodeName
			}
			eps = append(eps, fmt.Sprintf("{addresses: [10.%d.%d.%d], nodeName: %s}", 1+i/250, i%250, j+1, node))
		}
		fmt.Fprintf(&m, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {namespace: ns, name: %s-1, labels: {kubernetes.io/service-name: %s}}\naddressType: IPv4\nendpoints: [%s]\nports: [{name: p80, port: 80, protocol: TCP}, {name: p53, port: 53, protocol: UDP}]\n---\n", name, name, strings.Join(eps, ", "))
	}
	return m.String()
}

// restoreState is an iptables-restore --noflush model: table → chain →
// rules. apply checks what the kernel would: rules go to chains that
// exist, jumps to KUBE- chains that exist, deleted chains exist.
type restoreState map[string]map[string][]string

func newRestoreState() restoreState {
	s := restoreState{"filter": {}, "nat": {}}
	for _, c := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		s["filter"][c] = nil
	}
	for _, c := range []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"} {
		s["nat"][c] = nil
	}
	// What the jump rules create before the first restore.
	for _, j := range JumpRules() {
		s[j.Table][j.Args[len(j.Args)-1]] = nil
	}
	return s
}

func (s restoreState) clone() restoreState {
	out := restoreState{}
	for t, chains := range s {
		out[t] = maps.Clone(chains)
	}
	return out
}

// apply applies input, one transaction per "*table … COMMIT"; touched is
// called with every chain a transaction declares.
func (s restoreState) apply(input string, touched func(txn int, table, chain string)) error {
	txn := -1
	for _, t := range parseRestore(input) {
		txn++
		chains := s[t.name]
		next := maps.Clone(chains)
		for _, c := range t.chains {
			next[c] = nil
			if touched != nil {
				touched(txn, t.name, c)
			}
		}
		for _, c := range slices.Sorted(maps.Keys(t.rules)) {
			if _, ok := next[c]; !ok {
				return fmt.Errorf("transaction %d: rule in %s %s, which does not exist", txn, t.name, c)
			}
			for _, r := range t.rules[c] {
				if j := jumpTarget(r); strings.HasPrefix(j, "KUBE-") {
					if _, ok := next[j]; !ok {
						return fmt.Errorf("transaction %d: %q jumps to %s, which does not exist", txn, r, j)
					}
				}
				next[c] = append(next[c], r)
			}
		}
		for _, l := range t.other {
			c, ok := strings.CutPrefix(l, "-X ")
			if !ok {
				return fmt.Errorf("transaction %d: unexpected line %q", txn, l)
			}
			if _, ok := next[c]; !ok {
				return fmt.Errorf("transaction %d: -X %s, which does not exist", txn, c)
			}
			delete(next, c)
		}
		s[t.name] = next
	}
	return nil
}

// restoreFixtures are a node's states before a restore — fresh (only the
// jump rules' chains), or with the rules of 50 Services (their chains
// exist and are in use) — and the inputs restored on them: 140 Services,
// and 130 of them where 10 of the older ones are gone (their chains
// stale).
func restoreFixtures(t *testing.T) (fresh, older restoreState, full, withStale *Result) {
	t.Helper()
	fresh, older = newRestoreState(), newRestoreState()
	if err := older.apply(render(t, upstreamConfig(), decodeSnapshot(t, "older", mixedServices(50)), Options{}).Restore, nil); err != nil {
		t.Fatal(err)
	}
	natOf := func(s restoreState) []string { return slices.Sorted(maps.Keys(s["nat"])) }
	full = render(t, upstreamConfig(), decodeSnapshot(t, "mixed", mixedServices(140)), Options{})
	withStale = render(t, upstreamConfig(), decodeSnapshot(t, "mixed", mixedServices(140)[len(mixedServices(10)):]), Options{ExistingNATChains: natOf(older)})
	return fresh, older, full, withStale
}

func TestPrepareRestore(t *testing.T) {
	fresh, older, full, withStale := restoreFixtures(t)

	for _, tc := range []struct {
		name      string
		before    restoreState
		input     string
		stepLines int
		wantSplit bool
		// exists passes on or replaces the existence check.
		exists func(func(table, chain string) bool) func(table, chain string) bool
	}{
		{"fresh node", fresh, full.Restore, 200, true, nil},
		{"fresh node, one line per step", fresh, full.Restore, 1, true, nil},
		{"node with older rules and stale chains", older, withStale.Restore, 200, true, nil},
		{"few new chains", older, withStale.Restore, 10000, false, nil},
		{"partial sync (no existence check)", older, withStale.Restore, 200, false, func(func(string, string) bool) func(string, string) bool { return nil }},
		{"as rendered", fresh, full.Restore, 0, false, nil},
	} {
		if tc.exists == nil {
			tc.exists = func(f func(table, chain string) bool) func(table, chain string) bool { return f }
		}
		t.Run(tc.name, func(t *testing.T) {
			existed := func(table, chain string) bool {
				_, ok := tc.before[table][chain]
				return ok
			}
			got, n := PrepareRestore(tc.input, tc.exists(existed), tc.stepLines)
			switch {
			case tc.stepLines <= 0:
				if n != 1 || got != tc.input {
					t.Fatalf("%d transactions, want the input unchanged", n)
				}
				return
			case !tc.wantSplit && n != 1:
				t.Fatalf("%d transactions per table, want one", n)
			case tc.wantSplit && n < 3:
				t.Fatalf("%d transactions per table, want several", n)
			}
			// Each transaction's rules come chain by chain, in descending
			// order of chain name (KUBE-SERVICES before KUBE-NODEPORTS).
			prev := ""
			for line := range strings.SplitSeq(got, "\n") {
				if strings.HasPrefix(line, "*") {
					prev = ""
				}
				if chain, ok := strings.CutPrefix(line, "-A "); ok {
					chain, _, _ = strings.Cut(chain, " ")
					if prev != "" && chain > prev {
						t.Fatalf("rules of %s after those of %s", chain, prev)
					}
					prev = chain
				}
			}
			want := tc.before.clone()
			if err := want.apply(tc.input, nil); err != nil {
				t.Fatalf("the input itself: %v", err)
			}
			// A transaction before the last one of its table may only
			// create chains, and holds at most stepLines lines or one chain.
			txns := parseRestore(got)
			pre := func(i int) bool {
				return slices.ContainsFunc(txns[i+1:], func(u *restoreTable) bool { return u.name == txns[i].name })
			}
			for i, txn := range txns {
				if !pre(i) {
					continue
				}
				lines := len(txn.chains)
				for _, c := range txn.chains {
					lines += len(txn.rules[c])
				}
				if lines > tc.stepLines && len(txn.chains) > 1 {
					t.Errorf("transaction %d has %d lines in %d chains, want at most %d lines or one chain", i, lines, len(txn.chains), tc.stepLines)
				}
				undeclared := slices.ContainsFunc(slices.Collect(maps.Keys(txn.rules)), func(c string) bool { return !slices.Contains(txn.chains, c) })
				if len(txn.other) > 0 || undeclared {
					t.Errorf("transaction %d deletes chains or appends to chains it does not declare", i)
				}
			}
			split := tc.before.clone()
			err := split.apply(got, func(txn int, table, chain string) {
				if pre(txn) && existed(table, chain) {
					t.Errorf("transaction %d declares %s %s, which existed before: only the last of a table may change what is in use", txn, table, chain)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, split); diff != "" {
				t.Errorf("rules after the split input differ from those after the input (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJumpTarget(t *testing.T) {
	for rule, want := range map[string]string{
		`-A KUBE-SVC-X -m comment --comment "ns/svc:p -> 10.0.0.1:80" -j KUBE-SEP-Y`:      "KUBE-SEP-Y",
		`-A KUBE-SERVICES -m comment --comment "a -j KUBE-FAKE" -d 1.2.3.4 -j KUBE-SVC-X`: "KUBE-SVC-X",
		`-A KUBE-SEP-Y -p tcp -m tcp -j DNAT --to-destination 10.0.0.1:80`:                "DNAT",
		`-A KUBE-EXT-X -g KUBE-SVL-X`:                    "KUBE-SVL-X",
		`-A KUBE-FORWARD -m conntrack --ctstate INVALID`: "",
	} {
		if got := jumpTarget(rule); got != want {
			t.Errorf("jumpTarget(%q) = %q, want %q", rule, got, want)
		}
	}
}

// TestSplitRestore: split chain by chain into small transactions (for a
// node whose netlink socket cannot take the input in one), the input
// leaves exactly the rules it leaves in one transaction, every
// transaction jumps only to chains that exist by then, and the deletions
// of stale chains come last.
func TestSplitRestore(t *testing.T) {
	fresh, older, full, withStale := restoreFixtures(t)
	for _, tc := range []struct {
		name      string
		before    restoreState
		input     string
		stepLines int
	}{
		{"fresh node", fresh, full.Restore, 150},
		{"fresh node, one chain per transaction", fresh, full.Restore, 1},
		{"node with older rules and stale chains", older, withStale.Restore, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.before.clone()
			if err := want.apply(tc.input, nil); err != nil {
				t.Fatalf("the input itself: %v", err)
			}
			got := SplitRestore(tc.input, tc.stepLines)
			txns := parseRestore(got)
			if len(txns) < 4 {
				t.Fatalf("%d transactions, want several per table", len(txns))
			}
			last := func(i int) bool {
				return !slices.ContainsFunc(txns[i+1:], func(u *restoreTable) bool { return u.name == txns[i].name })
			}
			for i, txn := range txns {
				lines := len(txn.chains)
				for _, c := range txn.chains {
					lines += len(txn.rules[c])
				}
				switch {
				case last(i) && len(txn.chains) > 0:
					t.Errorf("the last transaction of %s declares chains %v; it should only delete stale ones", txn.name, txn.chains)
				case !last(i) && len(txn.other) > 0:
					t.Errorf("transaction %d deletes chains before the last", i)
				case lines > tc.stepLines && len(txn.chains) > 1:
					t.Errorf("transaction %d has %d lines in %d chains, want at most %d lines or one chain", i, lines, len(txn.chains), tc.stepLines)
				}
			}
			split := tc.before.clone()
			if err := split.apply(got, nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, split); diff != "" {
				t.Errorf("rules after the split input differ from those after the input (-want +got):\n%s", diff)
			}
		})
	}
}
