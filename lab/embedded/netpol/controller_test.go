package netpol

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// fakeApplier records scripts and fails the ones it is told to; its
// listing is the last script (or what a test sets).
type fakeApplier struct {
	scripts []string
	fail    func(script string) bool
	listing string
}

func (f *fakeApplier) Apply(_ context.Context, script string) error {
	f.scripts = append(f.scripts, script)
	if f.fail != nil && f.fail(script) {
		return errors.New("nft: Error: Could not process rule")
	}
	f.listing = script
	return nil
}

func (f *fakeApplier) List(context.Context) (string, error) { return f.listing, nil }

func newTestController(t *testing.T, ap Applier, objs ...*networkingv1.NetworkPolicy) (*Controller, *record.FakeRecorder, cache.Store) {
	t.Helper()
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	pods, nss, nps := f.Core().V1().Pods().Informer(), f.Core().V1().Namespaces().Informer(), f.Networking().V1().NetworkPolicies().Informer()
	for _, p := range matrixPods() {
		pods.GetStore().Add(p)
	}
	for _, n := range namespaces("x", "y", "z") {
		nss.GetStore().Add(n)
	}
	for _, np := range objs {
		nps.GetStore().Add(np)
	}
	rec := record.NewFakeRecorder(10)
	return &Controller{
		node: "n1", apply: ap, log: slog.New(slog.NewTextHandler(io.Discard, nil)), events: rec,
		pods: f.Core().V1().Pods().Lister(), nss: f.Core().V1().Namespaces().Lister(), nps: f.Networking().V1().NetworkPolicies().Lister(),
		trigger: make(chan struct{}, 1), reported: map[string]string{},
	}, rec, nps.GetStore()
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A bad policy is reported once as a Warning event and left out whole; the
// good one is enforced; fixing the bad one reports it enforced again.
func TestControllerReportsBadPolicies(t *testing.T) {
	bad := policy("x", "bad", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}},
	}}})
	good := policy("x", "good", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "b"), PolicyTypes: tIngress})
	ap := &fakeApplier{}
	c, rec, store := newTestController(t, ap, bad, good)
	ctx := context.Background()
	for range 2 {
		if err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	evs := events(rec)
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning PolicyNotEnforced node n1 does not enforce this NetworkPolicy: spec.ingress[0].from[0].ipBlock.cidr") {
		t.Errorf("events = %q, want one PolicyNotEnforced warning", evs)
	}
	if len(ap.scripts) != 1 {
		t.Fatalf("%d scripts applied, want 1 (the second sync has nothing to change)", len(ap.scripts))
	}
	if s := ap.scripts[0]; strings.Contains(s, "x/bad") || !strings.Contains(s, "ingress-pod-x/b") || strings.Contains(s, "ingress-pod-x/a") {
		t.Errorf("the bad policy was applied, or the good one was not:\n%s", s)
	}
	// Fixed: enforced, and said so.
	fixed := bad.DeepCopy()
	fixed.Spec.Ingress[0].From[0].IPBlock.CIDR = "10.0.0.0/8"
	store.Update(fixed)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := events(rec); len(evs) != 1 || !strings.HasPrefix(evs[0], "Normal PolicyEnforced") {
		t.Errorf("events = %q, want one PolicyEnforced", evs)
	}
	if s := ap.scripts[len(ap.scripts)-1]; !strings.Contains(s, "ingress-policy-x/bad") || strings.Contains(s, "delete table") {
		t.Errorf("the fixed policy was not added as a difference:\n%s", s)
	}
}

// A difference the kernel refuses (someone deleted a chain by hand, say)
// is followed at once by a whole new table; a whole table refused is an
// error, and the next sync starts whole again.
func TestControllerFallsBackToWholeTable(t *testing.T) {
	ap := &fakeApplier{}
	deny := policy("x", "deny", networkingv1.NetworkPolicySpec{PolicyTypes: tIngress})
	c, _, store := newTestController(t, ap, deny)
	ctx := context.Background()
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ap.fail = func(s string) bool { return !strings.Contains(s, "delete table") }
	store.Delete(deny)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(ap.scripts); n != 3 || !strings.HasPrefix(ap.scripts[2], "add table inet kube-network-policies\ndelete table") {
		t.Fatalf("scripts: %q", ap.scripts)
	}
	ap.fail = func(string) bool { return true }
	store.Add(deny)
	if err := c.Sync(ctx); err == nil {
		t.Fatal("no error when nft refuses everything")
	}
	ap.fail = nil
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if last := ap.scripts[len(ap.scripts)-1]; !strings.Contains(last, "delete table") {
		t.Errorf("after a failure the next sync is not whole:\n%s", last)
	}
}

// The periodic check leaves an intact table alone and rewrites one edited
// by hand.
func TestControllerRepairsHandEdits(t *testing.T) {
	ap := &fakeApplier{}
	c, _, _ := newTestController(t, ap, policy("x", "deny", networkingv1.NetworkPolicySpec{PolicyTypes: tIngress}))
	ctx := context.Background()
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	c.CheckTable(ctx)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ap.scripts) != 1 {
		t.Fatalf("an intact table was rewritten: %d scripts", len(ap.scripts))
	}
	ap.listing = "table inet kube-network-policies {}" // a learner flushed it
	c.CheckTable(ctx)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ap.scripts) != 2 || !strings.Contains(ap.scripts[1], "delete table") || !strings.Contains(ap.scripts[1], "ingress-pod-x/a") {
		t.Fatalf("the edited table was not rewritten whole: %q", ap.scripts[1:])
	}
}

// A sync records how far the table is only once the kernel has it: the
// versions read before the objects were listed; a sync that failed leaves
// the record where it was; one with nothing to change still moves it on.
func TestControllerRecordsProgress(t *testing.T) {
	ap := &fakeApplier{}
	c, _, store := newTestController(t, ap)
	c.progress = &Progress{}
	versions := Synced{Pods: "10", Namespaces: "4", Policies: "7"}
	c.versions = func() Synced { return versions }
	ctx := context.Background()
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.progress.Get(); got != versions {
		t.Errorf("after the first sync: %+v", got)
	}
	versions.Pods = "11"
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.progress.Get(); got.Pods != "11" {
		t.Errorf("after a sync with nothing to change: %+v", got)
	}
	// A change that the kernel refuses, whole and in part.
	ap.fail = func(string) bool { return true }
	versions.Policies = "8"
	store.Add(policy("x", "deny", networkingv1.NetworkPolicySpec{PolicyTypes: tIngress}))
	if err := c.Sync(ctx); err == nil {
		t.Fatal("no error when nft refuses everything")
	}
	if got := c.progress.Get(); got.Policies != "7" {
		t.Errorf("recorded %+v although the kernel has none of it", got)
	}
	ap.fail = nil
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.progress.Get(); got.Policies != "8" {
		t.Errorf("after the repair: %+v", got)
	}
}
