//go:build linux

package netpol_test

import (
	"context"
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkPolicyToDataplane measures, on a real cluster, how long a
// change in the API takes to change what happens to packets: from the
// write (a NetworkPolicy created, a Pod relabelled) to the first probe
// that gets through, probing every 10 ms; each change is also undone and
// must block again. x/a (isolated by a deny-all
// policy) is the server; x/b, on another node, the client.
func BenchmarkPolicyToDataplane(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	e.reset(ctx)
	e.apply(ctx, np("x", "deny-a", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "a"), PolicyTypes: ingressOnly}))
	allow := np("x", "allow-b", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "a"),
		Ingress: from(nil, networkingv1.NetworkPolicyPeer{PodSelector: lbl("allowed", "yes")})})
	tcp80 := probes[0]
	blocked := func() bool {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if !probeWithin(e.netns["x/b"], tcp80, ipOf(e, "x/a"), 300*time.Millisecond) {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false
	}
	open := func(start time.Time) time.Duration {
		for time.Since(start) < 10*time.Second {
			if probeWithin(e.netns["x/b"], tcp80, ipOf(e, "x/a"), 50*time.Millisecond) {
				return time.Since(start)
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.Fatalf("the change did not reach the dataplane within 10 s")
		return 0
	}
	if !blocked() {
		b.Fatal("x/b reaches x/a through the deny-all policy")
	}
	var policyLat, labelLat []time.Duration
	labelled := map[string]string{"pod": "b", "allowed": "yes"}
	for b.Loop() {
		// A new policy, whose peer selects the labelled client.
		e.relabel(ctx, "pods", "x", "b", labelled)
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		e.apply(ctx, allow.DeepCopy())
		policyLat = append(policyLat, open(start))
		// The client's label goes: blocked again.
		e.relabel(ctx, "pods", "x", "b", map[string]string{"pod": "b"})
		if !blocked() {
			b.Fatal("x/b still reaches x/a after losing the label the policy selects")
		}
		// The label comes back.
		start = time.Now()
		e.relabel(ctx, "pods", "x", "b", labelled)
		labelLat = append(labelLat, open(start))
		if err := e.client.NetworkingV1().NetworkPolicies("x").Delete(ctx, "allow-b", metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		if !blocked() {
			b.Fatal("x/b still reaches x/a after the allowing policy was deleted")
		}
	}
	report(b, "policy", policyLat)
	report(b, "label", labelLat)
	e.reset(ctx)
}

func report(b *testing.B, what string, lat []time.Duration) {
	slices.Sort(lat)
	p50, max := lat[len(lat)/2], lat[len(lat)-1]
	b.ReportMetric(float64(p50.Microseconds())/1000, what+"-p50-ms")
	b.ReportMetric(float64(max.Microseconds())/1000, what+"-max-ms")
	b.Logf("%s change → dataplane over %d runs: p50 %s, max %s", what, len(lat), p50.Round(time.Millisecond), max.Round(time.Millisecond))
	if p50 > time.Second {
		b.Errorf("%s changes take %s (median) to reach the dataplane; the budget is 1 s", what, p50)
	}
}
