package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserLabLife is the lab's life as a learner sees it in the
// workspace: the strip says the lab is healthy; hints come one at a time,
// in order, to "No more hints"; a failed check keeps its expected value
// until the hint that names it; a lab killed under the page turns the
// strip red with Start over, and the panels pause instead of showing what
// was; it comes back on its own; End scenario asks, then ends.
func TestBrowserLabLife(t *testing.T) {
	ctx, cancel := context.WithTimeout(browser(t), 3*time.Minute)
	defer cancel()
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	sh := &shots{t: t, dir: artifactsDir(t)}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		doStep(t, ctx, sh, what, quick, actions...)
	}
	step("open the workspace: the lab is healthy",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(l.url+"/scenarios/selector-typo"),
		waitText(`#views-status`, "live"),
		waitJS(`document.querySelector('#lab-health').dataset.state === 'healthy'`),
		waitText(`#lab-health .health-text`, "The lab is healthy"),
		waitJS(`[...document.querySelectorAll('#views-body .panel .gen')].length === 6 && document.querySelector('#panel-slices .gen').textContent.startsWith('cluster lab · life ')`),
		waitJS(`getComputedStyle(document.querySelector('#lab-health .health-dot')).backgroundColor === 'rgb(26, 127, 55)'`),
		sh.take("healthy"))
	step("a check before any hint keeps the expected value back",
		click(`#check`),
		waitText(`#check-verdict`, "Not there yet. Score: 40% (2 of 5 points)"),
		waitText(`[data-check="slice-has-ready-endpoints"] .withheld`, "shows once you have seen hint 2"),
		waitJS(`!document.querySelector('#check-results').innerText.includes('expected "web"')`),
		waitText(`#score`, "Score: 40% (2 of 5 points)"),
		sh.take("withheld"))
	step("hints one at a time, in order",
		waitText(`#hint`, "Show hint 1 of 3"),
		click(`#hint`),
		waitJS(`document.querySelectorAll('#hints li').length === 1 && document.querySelector('#hints li').dataset.hint === '1'`),
		waitText(`#hint`, "Show hint 2 of 3"),
		click(`#hint`),
		waitJS(`[...document.querySelectorAll('#hints li')].map((li) => li.dataset.hint).join() === '1,2'`),
		waitText(`#hint`, "Show hint 3 of 3"),
		sh.take("two-hints"))
	step("after the hint that names it, the check shows what it wants",
		click(`#check`),
		waitText(`[data-check="slice-has-ready-endpoints"] .expected`, `expected "web"`),
		click(`#hint`),
		waitJS(`[...document.querySelectorAll('#hints li')].map((li) => li.dataset.hint).join() === '1,2,3'`),
		waitText(`#hint`, "No more hints"),
		waitJS(`document.querySelector('#hint').disabled`),
		sh.take("no-more-hints"))
	step("a reload shows the same hints and score",
		chromedp.Reload(),
		waitText(`#views-status`, "live"),
		waitJS(`[...document.querySelectorAll('#hints li')].map((li) => li.dataset.hint).join() === '1,2,3'`),
		waitText(`#hint`, "No more hints"))
	// The lab goes away under the page.
	l.p.Delete(t.Context(), "lab")
	step("the lab killed under the page: the strip says so, the panels pause",
		waitJS(`document.querySelector('#lab-health').dataset.state === 'down'`),
		waitText(`#lab-health .health-text`, "The lab is down: its cluster lab is not there any more."),
		chromedp.WaitVisible(chromedp.CSS(`#views-paused`)),
		waitText(`#views-paused`, "Paused: the lab is down."),
		waitJS(`getComputedStyle(document.querySelector('#panel-slices')).visibility === 'hidden'`),
		waitText(`#views-status`, "paused"),
		chromedp.WaitVisible(chromedp.CSS(`#health-start-over`)),
		sh.take("lab-down"))
	for _, w := range []int64{800, 600} {
		step(fmt.Sprintf("at %dx900 the strip says it whole, with Start over in reach, and every view's tab shows", w),
			chromedp.EmulateViewport(w, 900),
			waitJS(`(() => {
				const t = document.querySelector('#lab-health .health-text').getBoundingClientRect();
				const el = document.querySelector('#lab-health .health-text');
				const b = document.querySelector('#health-start-over').getBoundingClientRect();
				return el.scrollWidth <= el.clientWidth + 1 && el.scrollHeight <= el.clientHeight + 1 &&
					t.right <= innerWidth && b.right <= innerWidth && b.bottom <= innerHeight && b.width > 0 &&
					document.documentElement.scrollWidth <= innerWidth &&
					[...document.querySelectorAll('#views-tabs [role=tab]')].every((tab) => {
						const r = tab.getBoundingClientRect(), bar = document.querySelector('#views-tabs').getBoundingClientRect();
						return r.width > 0 && r.right <= bar.right + 1 && r.bottom <= bar.bottom + 1;
					});
			})()`),
			sh.take(fmt.Sprintf("lab-down-%d", w)))
	}
	step("back to 1280x800", chromedp.EmulateViewport(1280, 800))
	step("the raw error is behind details",
		waitJS(`!document.querySelector('#lab-health .health-text').innerText.includes('not found')`),
		click(`#lab-health .health-details summary`),
		chromedp.WaitVisible(chromedp.CSS(`#lab-health .health-details pre.raw`)),
		sh.take("lab-down-details"),
		click(`#lab-health .health-details summary`))
	step("Start over from the strip asks first, saying what is lost",
		click(`#health-start-over`),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog`)),
		waitText(`#confirm-text`, "What you changed in the cluster is lost"),
		waitText(`#confirm-ok`, "Start over"),
		sh.take("confirm-start-over"),
		click(`#confirm-cancel`),
		waitJS(`!document.querySelector('#confirm-dialog').open`))
	l.p.Add(l.fc.Cluster) // the same cluster back
	step("the lab back: the strip turns healthy, the panels show again",
		waitJS(`document.querySelector('#lab-health').dataset.state === 'healthy'`),
		waitJS(`document.querySelector('#views-paused') === null`),
		waitText(`#views-status`, "live"),
		waitText(`#panel-slices`, "ClusterIP 10.96.38.171"))
	step("End scenario asks, then ends it",
		click(`#end`),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog`)),
		waitText(`#confirm-text`, "the cluster stays for the next scenario"),
		sh.take("confirm-end"),
		click(`#confirm-ok`),
		chromedp.WaitVisible(chromedp.CSS(`#start-form`)),
		sh.take("ended"))
	if cur, _ := l.fa.Current(t.Context(), DefaultLearner, "selector-typo"); cur.State != StateAbandoned {
		t.Errorf("after End scenario: %+v", cur)
	}
}
