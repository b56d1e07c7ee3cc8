package netpol

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// scratchNetns creates a network namespace for the test and removes it at
// the end.
func scratchNetns(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("kernel test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("kernel test: needs root")
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "svclab-netpoltest-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}

func listTable(t testing.TB, ns string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", Family, Table).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table: %v: %s", err, out)
	}
	return string(out)
}

// The kernel takes every golden ruleset, and every difference turns the
// kernel's table into exactly what a whole rendering of the new ruleset
// gives.
func TestRulesetsLoadInKernel(t *testing.T) {
	ns := scratchNetns(t)
	ap := NetnsApplier{Netns: ns}
	ctx := context.Background()
	for _, tc := range compileCases() {
		r, _ := Compile(Input{Node: "n1", Pods: tc.pods, Namespaces: namespaces("x", "y", "z"), Policies: tc.policies})
		if err := ap.Apply(ctx, Render(r)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	base := Input{Node: "n1", Pods: matrixPods(), Namespaces: namespaces("x", "y", "z"), Policies: []*networkingv1.NetworkPolicy{
		policy("x", "allow-b", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"), Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "b")}},
		}}}),
	}}
	// Walk through every golden case and back, by differences only.
	states := []Input{base}
	for _, tc := range compileCases() {
		states = append(states, Input{Node: "n1", Pods: tc.pods, Namespaces: namespaces("x", "y", "z"), Policies: tc.policies})
	}
	// The same peer selecting other pods: its set is replaced.
	edited := base
	edited.Policies = []*networkingv1.NetworkPolicy{base.Policies[0].DeepCopy()}
	edited.Policies[0].Spec.Ingress[0].From[0].PodSelector = sel("pod", "c")
	states = append(states, base, edited, base)
	prev, _ := Compile(states[0])
	if err := ap.Apply(ctx, Render(prev)); err != nil {
		t.Fatal(err)
	}
	for i, in := range states[1:] {
		next, _ := Compile(in)
		if err := ap.Apply(ctx, Diff(prev, next)); err != nil {
			t.Fatalf("step %d: %v\n%s", i+1, err, Diff(prev, next))
		}
		got := listTable(t, ns)
		ref := scratchNetns(t)
		if err := (NetnsApplier{Netns: ref}).Apply(ctx, Render(next)); err != nil {
			t.Fatal(err)
		}
		if want := listTable(t, ref); normalize(got) != normalize(want) {
			t.Errorf("step %d: after the difference the table is\n%s\nwant\n%s", i+1, normalize(got), normalize(want))
		}
		prev = next
	}
}

// normalize drops the order of chains and sets, which depends on history.
func normalize(s string) string {
	var blocks []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			blocks = append(blocks, strings.Join(cur, "\n"))
		}
		cur = nil
	}
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "" || l == "}" {
			continue
		}
		if strings.HasPrefix(l, "\tset ") || strings.HasPrefix(l, "\tmap ") || strings.HasPrefix(l, "\tchain ") {
			flush()
		}
		cur = append(cur, l)
	}
	flush()
	sort.Strings(blocks)
	return strings.Join(blocks, "\n")
}

// The listing the agent compares to find hand edits is stable while
// nothing changes, and changes with a hand edit.
func TestListingFindsHandEdits(t *testing.T) {
	ns := scratchNetns(t)
	ap := NetnsApplier{Netns: ns}
	ctx := context.Background()
	tc := compileCases()[3] // egress, ports and ipBlocks
	r, _ := Compile(Input{Node: "n1", Pods: tc.pods, Namespaces: namespaces("x", "y", "z"), Policies: tc.policies})
	if err := ap.Apply(ctx, Render(r)); err != nil {
		t.Fatal(err)
	}
	first, err := ap.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Traffic would move the counters; -s leaves them out.
	if out, err := exec.Command("ip", "netns", "exec", ns, "nft", "reset", "counters", "table", Family, Table).CombinedOutput(); err != nil {
		t.Logf("nft reset counters: %v: %s", err, out)
	}
	if again, _ := ap.List(ctx); again != first {
		t.Fatalf("two listings of an unchanged table differ:\n%s\n---\n%s", first, again)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "nft", "flush", "chain", Family, Table, "egress-policy-x/egress").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if edited, _ := ap.List(ctx); edited == first {
		t.Fatal("a flushed chain does not show in the listing")
	}
}

// A random walk through label, namespace, pod and policy changes, applied
// by differences only, always leaves the kernel's table equal to a whole
// rendering of the same state.
func TestDiffRandomWalkInKernel(t *testing.T) {
	ns, ref := scratchNetns(t), scratchNetns(t)
	ap, refAp := NetnsApplier{Netns: ns}, NetnsApplier{Netns: ref}
	ctx := context.Background()
	rng := mrand.New(mrand.NewPCG(1, 2))
	pool := []*networkingv1.NetworkPolicy{}
	for _, tc := range compileCases() {
		pool = append(pool, tc.policies...)
	}
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	in := Input{Node: "n1", Pods: matrixPods(), Namespaces: namespaces("x", "y", "z")}
	prev, _ := Compile(in)
	if err := ap.Apply(ctx, Render(prev)); err != nil {
		t.Fatal(err)
	}
	for step := range 60 {
		var what string
		switch rng.IntN(6) {
		case 0:
			p := in.Pods[rng.IntN(len(in.Pods))]
			p.Labels = map[string]string{"pod": pick("a", "b", "c")}
			what = "relabel pod " + p.Name
		case 1:
			n := in.Namespaces[rng.IntN(len(in.Namespaces))]
			n.Labels["ns"] = pick("x", "y", "z")
			what = "relabel namespace " + n.Name
		case 2, 3:
			np := pool[rng.IntN(len(pool))].DeepCopy()
			np.Namespace = pick("x", "y", "z")
			in.Policies = append(in.Policies, np)
			what = "add policy " + np.Namespace + "/" + np.Name
		case 4:
			if len(in.Policies) > 0 {
				i := rng.IntN(len(in.Policies))
				what = "delete policy " + in.Policies[i].Name
				in.Policies = append(in.Policies[:i:i], in.Policies[i+1:]...)
			}
		case 5:
			if len(in.Policies) > 0 {
				np := in.Policies[rng.IntN(len(in.Policies))]
				for i := range np.Spec.Ingress {
					for j := range np.Spec.Ingress[i].From {
						if np.Spec.Ingress[i].From[j].PodSelector != nil {
							np.Spec.Ingress[i].From[j].PodSelector = sel("pod", pick("a", "b", "c"))
						}
					}
				}
				what = "edit peers of " + np.Name
			}
		}
		// Policies of one name per namespace: the API allows no twins.
		seen := map[string]bool{}
		var uniq []*networkingv1.NetworkPolicy
		for _, np := range in.Policies {
			if k := np.Namespace + "/" + np.Name; !seen[k] {
				seen[k] = true
				uniq = append(uniq, np)
			}
		}
		in.Policies = uniq
		next, _ := Compile(in)
		if err := ap.Apply(ctx, Diff(prev, next)); err != nil {
			t.Fatalf("step %d (%s): %v\n%s", step, what, err, Diff(prev, next))
		}
		if err := refAp.Apply(ctx, Render(next)); err != nil {
			t.Fatal(err)
		}
		if got, want := listTable(t, ns), listTable(t, ref); normalize(got) != normalize(want) {
			t.Fatalf("step %d (%s): after the difference the table is\n%s\nwant\n%s", step, what, normalize(got), normalize(want))
		}
		prev = next
	}
}
