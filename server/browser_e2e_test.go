package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/lab/views"
)

// TestBrowserSelectorTypo is the acceptance walk: in chromium, a learner
// opens the catalog, starts selector-typo (a real embedded cluster is
// created), types the fix into the browser terminal's control-plane tab,
// watches the EndpointSlice and rules panels change, checks, and passes.
func TestBrowserSelectorTypo(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end: needs root for an embedded cluster")
	}
	bctx := browser(t)
	// The server's background work (the scenario start) ends with the
	// test: a step that times out must not leave s.Wait waiting on it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stateDir := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := embedded.New(stateDir, log)
	// A name of its own per run: a run killed half-way (a CI timeout)
	// must not leave a cluster the next run trips over.
	name := fmt.Sprintf("ui%06x", rand.Uint32()&0xffffff)
	t.Cleanup(func() {
		if err := p.Delete(context.Background(), name); err != nil && !strings.Contains(err.Error(), "not found") {
			t.Errorf("deleting cluster %s: %v", name, err)
		}
	})
	st, err := store.Open(ctx, store.DefaultPath(stateDir), store.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The machine's claims on clusters, in a directory of the test's own.
	ownersDir := t.TempDir()
	owners, err := owner.New(owner.Options{Dir: ownersDir, Command: "svclab serve", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	m, err := attempt.New(attempt.Options{Store: st, Provider: p, Log: log, Owners: owners})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Clusters: p, Log: log, Background: ctx, Catalog: m.Catalog(), Attempts: AttemptManager{M: m}, Owners: owners,
		Learner: store.LocalLearner, DefaultCluster: name, Timeline: st,
		KubeBin: func(ctx context.Context) (string, error) { return kubebin.Locate(ctx, nil) },
		PodExec: func(c cluster.Cluster) (views.PodExecutor, error) { return grade.NewPodExecutor(c) },
	}
	ts := httptest.NewServer(s.Handler())
	defer func() { ts.Close(); cancel(); s.Wait() }()
	sh := &shots{t: t, dir: artifactsDir(t)}

	step := func(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		doStep(t, bctx, sh, what, timeout, actions...)
	}
	step("open the catalog", quick,
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-scenario="selector-typo"]`)),
		sh.take("catalog"))
	step("open selector-typo and start it", quick,
		click(`[data-scenario="selector-typo"] a`),
		chromedp.WaitVisible(chromedp.CSS(`#start-form`)),
		click(`#start-form button`),
		waitText(`#steps`, "Creating"),
		sh.take("cluster-starting"))
	step("the scenario is set up and the panels show the broken state", slow,
		notFailed(),
		waitJS(`document.querySelector("#panels") !== null`),
		waitText(`#panel-slices`, "No endpoints"),
		waitText(`#panel-rules`, "rejected (no endpoints)"),
		waitText(`#panel-probes .latest`, "refused"),
		sh.take("broken"))
	step("the control-plane terminal opens with kubectl", quick,
		waitText(`.term-pane:not([hidden]) .xterm-rows`, "control-plane"),
		typeLine("kubectl -n shop get svc web -o jsonpath='{.spec.selector}'; echo"),
		waitText(`.term-pane:not([hidden]) .xterm-rows`, `{"app":"wbe"}`))
	step("type the fix; the EndpointSlice and rules panels change", quick,
		typeLine(`kubectl -n shop patch service web --type=merge -p '{"spec":{"selector":{"app":"web"}}}'`),
		waitText(`.term-pane:not([hidden]) .xterm-rows`, "service/web patched"),
		waitJS(`document.querySelectorAll('#panel-slices tr[data-endpoint]').length === 2`),
		click(`#tab-rules`),
		waitText(`#panel-rules`, "load-balanced to 2 endpoints"),
		chromedp.WaitVisible(chromedp.CSS(`#panel-rules .chg-added`)),
		waitText(`#panel-timeline`, "kubectl -n shop patch service web"),
		sh.take("fixed"))
	step("the probes succeed from every source", quick,
		waitJS(`(() => { const ps = [...document.querySelectorAll('#panel-probes .latest .probe')]; return ps.length >= 4 && ps.every(p => p.dataset.outcome === "success"); })()`),
		click(`#tab-path`),
		click(`#path-form button`),
		waitText(`#panel-path`, "DNAT"),
		sh.take("traffic"))
	step("Check my work passes and explains", quick,
		click(`#check`),
		waitText(`#check-results`, "Every check passed"),
		waitText(`#explanation`, "What broke."),
		waitText(`#attempt-state`, "passed"),
		sh.take("passed"))
	step("the replay steps through the attempt", quick,
		click(`#replay-link`),
		waitText(`#replay`, "kubectl -n shop patch service web"),
		waitText(`#replay`, "checks passed, score 100% (9 of 9 points)"),
		waitJS(`document.querySelector('#replay li[data-kind="proxier"]') !== null`),
		click(`#replay-prev`),
		waitText(`#replay-at`, "step "),
		sh.take("replay"))
	step("the catalog marks it solved", quick,
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-scenario="selector-typo"][data-progress="passed"]`)),
		sh.take("catalog-solved"))

	// The lab's life: Start over shows the new setup's ClusterIP within
	// seconds, a lab killed under the page says so and Start over brings
	// it back, Delete lab removes the cluster.
	clusterIP := func() string {
		t.Helper()
		c, err := p.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cs, _ := c.Client()
		svc, err := cs.CoreV1().Services("shop").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc.Spec.ClusterIP
	}
	old := clusterIP()
	step("the workspace shows the healthy lab", quick,
		chromedp.Navigate(ts.URL+"/scenarios/selector-typo"),
		waitText(`#panel-slices`, "ClusterIP "+old),
		waitJS(`document.querySelector('#lab-health').dataset.state === 'healthy'`),
		sh.take("healthy"))
	step("Start over asks, then sets the scenario up again", slow,
		click(`#reset`),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog`)),
		waitText(`#confirm-text`, "What you changed in the cluster is lost"),
		chromedp.Evaluate[chromedp.Void](`window.svclabOldPage = true`),
		click(`#confirm-ok`),
		waitJS(`!window.svclabOldPage`),
		notFailed(),
		waitJS(`document.querySelector('#attempt').dataset.attempt === '2'`))
	fresh := clusterIP()
	if fresh == old {
		t.Errorf("Start over kept the Service's ClusterIP %s: was the scenario set up again?", old)
	}
	start := time.Now()
	step("the views show the new setup's ClusterIP", quick,
		waitText(`#panel-slices`, "ClusterIP "+fresh),
		waitJS(fmt.Sprintf(`!document.querySelector('#panel-slices').innerText.includes(%q)`, "ClusterIP "+old+" ")),
		sh.take("started-over"))
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the views took %s to show the new ClusterIP", d)
	}
	if err := p.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	step("the lab deleted under the page: the strip says so, the panels pause", quick,
		waitJS(`document.querySelector('#lab-health').dataset.state === 'down'`),
		waitText(`#lab-health .health-text`, "The lab is down"),
		chromedp.WaitVisible(chromedp.CSS(`#views-paused`)),
		sh.take("lab-down"))
	step("Start over from the strip brings the lab back", slow,
		click(`#health-start-over`),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog`)),
		chromedp.Evaluate[chromedp.Void](`window.svclabOldPage = true`),
		click(`#confirm-ok`),
		waitJS(`!window.svclabOldPage`),
		notFailed(),
		waitJS(`document.querySelector('#attempt').dataset.attempt === '3'`),
		waitJS(`document.querySelector('#lab-health').dataset.state === 'healthy'`),
		waitText(`#panel-slices`, "No endpoints"),
		sh.take("back"))
	step("Delete lab asks, then removes the cluster", quick,
		click(`#delete-lab`),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog`)),
		waitText(`#confirm-text`, "is deleted with everything in it"),
		chromedp.Evaluate[chromedp.Void](`window.svclabOldPage = true`),
		click(`#confirm-ok`),
		waitJS(`!window.svclabOldPage`),
		chromedp.WaitVisible(chromedp.CSS(`#start-form`)),
		sh.take("deleted"))
	if _, err := p.Get(ctx, name); !errors.Is(err, cluster.ErrNotFound) {
		t.Errorf("after Delete lab the cluster is still there: %v", err)
	}

	// Another process holds the cluster's name: starting there is
	// refused, saying who holds it.
	other, err := owner.New(owner.Options{Dir: ownersDir, Command: "svclab exercise run", StateDir: "/elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := other.Acquire(ctx, owner.Claim{Backend: "embedded", Cluster: name}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	step("a cluster another process holds is refused, saying who holds it", quick,
		click(`#start-form button`),
		waitText(`#outcome-summary`, "Cluster "+name+" is in use by svclab exercise run"),
		chromedp.WaitVisible(chromedp.CSS(`#outcome-summary`)),
		sh.take("in-use"))
}

// notFailed fails at once when the operation page reports the start
// failed, instead of waiting for the scenario page that will not come.
func notFailed() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for {
			out, err := chromedp.Evaluate[string](`(() => { const o = document.querySelector("#outcome"); if (o && o.querySelector(".state-broken")) return o.innerText; return document.querySelector("#panels") ? "ok" : ""; })()`)(ctx, t)
			if err == nil && out == "ok" {
				return nil
			}
			if err == nil && out != "" {
				return fmt.Errorf("the scenario did not start: %s", out)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for the scenario page: %w", ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// typeLine types a command into the visible terminal tab and presses
// Enter: the text goes in as text input (Input.insertText, as a paste or an
// input method would deliver it), Enter as a key press.
func typeLine(line string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Focus(chromedp.CSS(`.term-pane:not([hidden]) textarea.xterm-helper-textarea`)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: line})
			return err
		}),
		chromedp.KeyEvent("\r"),
	)
}
