package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's chromium (installed by svclab setup)
// with chromedp. Screenshots go to $SVCLAB_TEST_ARTIFACTS (default
// $TMPDIR/svclab-ui-artifacts), one per step, kept after the test.

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on this machine: run 'svclab setup' (go tool task setup) to install it")
	return ""
}

func artifactsDir(t *testing.T) string {
	dir := os.Getenv("SVCLAB_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "svclab-ui-artifacts")
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// browser starts a headless chromium and returns a context for chromedp
// (bound steps with a timeout derived from it).
func browser(t *testing.T) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in a container
		chromedp.WindowSize(1600, 1100),
		chromedp.Flag("disable-dev-shm-usage", true),
		// chromium's own temporary files (its singleton socket) go with
		// the test: it is killed before it removes them.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	// The first action starts the browser, under a context without a
	// timeout (a timeout there would stop the browser).
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

type shots struct {
	t   *testing.T
	dir string
	n   int
}

func (s *shots) take(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		buf, err := chromedp.FullScreenshot(100)(ctx, t) // 100: PNG
		if err != nil {
			return err
		}
		s.n++
		return os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("%02d-%s.png", s.n, name)), buf, 0o644)
	})
}

// quick and slow are the deadlines of browser steps: most are quick,
// those that create a cluster slow.
const quick, slow = time.Minute, 5 * time.Minute

// termsState describes the page's terminals for a failed step: each one's
// size and the lines of its buffer, scrollback included.
const termsState = `(() => {
  const out = [];
  for (const [node, t] of Object.entries(window.svclabTerminals || {})) {
    const b = t.term.buffer.active;
    out.push(node + ": " + t.term.rows + " rows × " + t.term.cols + " cols, " + b.length + " lines, cursor at " + b.cursorY + "," + b.cursorX);
    for (let i = Math.max(0, b.length - 60); i < b.length; i++) out.push("  |" + b.getLine(i).translateToString(true));
  }
  return out.join("\n");
})()`

// doStep runs one step of a browser walk with a deadline, so that a page
// that never shows what the step waits for fails the test with a
// screenshot and the page's text instead of hanging until the package's
// timeout.
func doStep(t *testing.T, bctx context.Context, sh *shots, what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	start := time.Now()
	sctx, cancel := context.WithTimeout(bctx, timeout)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		dctx, dcancel := context.WithTimeout(bctx, 10*time.Second)
		defer dcancel()
		target := chromedp.FromContext(dctx).Target
		sh.take("failed-"+strings.ReplaceAll(what, " ", "-"))(dctx, target)
		page, _ := chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`)(dctx, target)
		// The terminals' own state: their size and every line they
		// hold, the scrollback included (what the screen shows is only
		// the bottom rows).
		terms, _ := chromedp.Evaluate[string](termsState)(dctx, target)
		t.Fatalf("%s: %v\nthe page said:\n%s\nits terminals:\n%s", what, err, page, terms)
	}
	t.Logf("%s (%s)", what, time.Since(start).Round(100*time.Millisecond))
}

// click clicks the element sel. Pages redraw parts of themselves from
// their event streams (the class pages, the live views); a redraw between
// finding the element and clicking it ("Could not find node with given
// id") is retried on the element that replaced it. The click is not sent
// when that happens, so nothing is clicked twice.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for {
			_, err := chromedp.Click(chromedp.CSS(sel))(ctx, t)
			if err == nil || !strings.Contains(err.Error(), "Could not find node with given id") && !strings.Contains(err.Error(), "detached") {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("clicking %s: %w (last: %v)", sel, ctx.Err(), err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// waitText waits until the text of the element sel contains want.
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	expr := fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel)
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		last := ""
		for {
			txt, err := chromedp.Evaluate[string](expr)(ctx, t)
			if err == nil && strings.Contains(txt, want) {
				return nil
			}
			last = txt
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %q in %s (it says %q): %w", want, sel, last, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// visibleTermSize is the shown terminal's size, "COLSxROWS" ("" with none).
const visibleTermSize = `(() => { const t = window.svclabTerminals && Object.values(window.svclabTerminals).find((x) => x.term.element && x.term.element.offsetParent !== null); return t ? t.term.cols + "x" + t.term.rows : ""; })()`

// waitJS waits until the JavaScript expression is true.
func waitJS(expr string, opts ...chromedp.EvaluateOption) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for {
			ok, err := chromedp.Evaluate[bool](expr, opts...)(ctx, t)
			if err == nil && ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", expr, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// TestBrowserLiveViews walks the UI in chromium against a fake cluster:
// the catalog, starting a scenario, the live panels following a rule
// change, a hint, a failing and a passing check with the explanation.
func TestBrowserLiveViews(t *testing.T) {
	ctx, cancel := context.WithTimeout(browser(t), 2*time.Minute)
	defer cancel()
	l := newLabServer(t)
	sh := &shots{t: t, dir: artifactsDir(t)}
	err := chromedp.Do(ctx,
		chromedp.Navigate(l.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-scenario="selector-typo"]`)),
		sh.take("catalog"),
		// Filter by difficulty.
		chromedp.SetValue(chromedp.CSS(`select[name="difficulty"]`), "hard"),
		click(`#catalog-filter button`),
		waitJS(`location.search.includes("difficulty=hard") && document.querySelector('[data-scenario]') !== null && document.querySelector('[data-scenario="selector-typo"]') === null`),
		sh.take("catalog-hard"),
		chromedp.Navigate(l.url+"/"),
		click(`[data-scenario="selector-typo"] a`),
		chromedp.WaitVisible(chromedp.CSS(`#start-form`)),
		sh.take("scenario"),
		click(`#start-form button`),
		// The operation page follows the setup, then goes on to the
		// scenario.
		chromedp.WaitVisible(chromedp.CSS(`#panels`)),
		waitText(`#panel-slices`, "shop/web"),
		waitText(`#panel-rules`, "rejected (no endpoints)"),
		waitText(`#panel-probes .latest`, "success"),
		waitText(`#panel-conntrack`, "10.244.2.2:8080"),
		chromedp.WaitReady(chromedp.CSS(`#panel-timeline`)),
		sh.take("panels"),
	)
	if err != nil {
		t.Fatal(err)
	}
	// Copy and paste in the browser terminal, as on Linux and Windows:
	// select and Ctrl+Shift+C copies the selection to the clipboard, a
	// right-click pastes the clipboard into the shell.
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name, AllowWithoutSanitization: true}, Setting: cdpbrowser.PermissionSettingGranted, Origin: l.url}); err != nil {
			t.Fatalf("granting %s: %v", name, err)
		}
	}
	const term = `window.svclabTerminals["lab-control-plane"].term`
	err = chromedp.Do(ctx,
		waitJS(`window.svclabTerminals && window.svclabTerminals["lab-control-plane"] && window.svclabTerminals["lab-control-plane"].ws.readyState === 1`),
		typeLine("echo copy-me-42"),
		waitText(`.term-pane:not([hidden]) .xterm-rows`, "copy-me-42"),
		chromedp.Evaluate[chromedp.Void](term+`.selectAll()`),
		chromedp.Focus(chromedp.CSS(`.term-pane:not([hidden]) textarea.xterm-helper-textarea`)),
		chromedp.KeyEvent("c", chromedp.KeyModifiers(chromedp.ModifierCtrl, chromedp.ModifierShift)),
		waitJS(`(async () => (await navigator.clipboard.readText()).includes("echo copy-me-42"))()`, chromedp.EvalAwaitPromise),
		chromedp.Evaluate[chromedp.Void](`navigator.clipboard.writeText("echo pasted-77")`, chromedp.EvalAwaitPromise),
		chromedp.Evaluate[chromedp.Void](`document.querySelector(".term-pane:not([hidden])").dispatchEvent(new MouseEvent("contextmenu", {bubbles: true, cancelable: true}))`),
		waitText(`.term-pane:not([hidden]) .xterm-rows`, "echo pasted-77"),
		sh.take("copy-paste"),
	)
	if err != nil {
		t.Fatalf("copy and paste: %v", err)
	}
	l.fc.SetRules(readTestdata(t, "nft-selector-typo-fixed.txt"))
	err = chromedp.Do(ctx,
		click(`#tab-rules`),
		waitText(`#panel-rules`, "load-balanced to 2 endpoints"),
		chromedp.WaitVisible(chromedp.CSS(`#panel-rules .chg-added`)),
		sh.take("rules-changed"),
		// The packet path from a node.
		click(`#tab-path`),
		click(`#path-form button`),
		waitText(`#panel-path`, "DNAT"),
		// A hint, a failing check, a passing one.
		click(`#hint`),
		waitText(`#hints`, "Does the Service have any endpoints?"),
		click(`#check`),
		waitText(`#check-results`, "Not there yet. Score: "),
		sh.take("check-failed"),
	)
	if err != nil {
		t.Fatal(err)
	}
	l.fa.pass.Store(true)
	err = chromedp.Do(ctx,
		click(`#check`),
		waitText(`#check-results`, "Every check passed"),
		waitText(`#explanation`, "What broke."),
		waitText(`#attempt-state`, "passed"),
		sh.take("passed"),
	)
	if err != nil {
		t.Fatal(err)
	}
}
