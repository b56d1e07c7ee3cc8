package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserNotes looks at Your notes as a learner does, wide and narrow:
// each question sits in the task pane with a field as wide as the pane
// (never wider), an answer typed and saved says so without leaving the
// page, an edit says it is not saved yet, and the answer is there again
// after a reload.
func TestBrowserNotes(t *testing.T) {
	ctx, cancel := context.WithTimeout(browser(t), 3*time.Minute)
	defer cancel()
	l := newLabServer(t)
	l.startAttempt(t, "debugging-sequence")
	sh := &shots{t: t, dir: artifactsDir(t)}
	type box struct{ X, W, PaneX, PaneW, ScrollW, InnerW float64 }
	const measureField = `(() => { const f = document.querySelector('#answer-step-named').getBoundingClientRect();
		const p = document.querySelector('#pane-task').getBoundingClientRect();
		return {X: f.x, W: f.width, PaneX: p.x, PaneW: p.width, ScrollW: document.documentElement.scrollWidth, InnerW: innerWidth}; })()`
	for i, size := range []struct{ w, h int64 }{{1280, 800}, {800, 900}} {
		name := fmt.Sprintf("%dx%d", size.w, size.h)
		answer := []string{"6", "step 6"}[i]
		doStep(t, ctx, sh, "open the notes at "+name, quick,
			chromedp.EmulateViewport(size.w, size.h),
			chromedp.Navigate(l.url+"/scenarios/debugging-sequence"),
			chromedp.WaitVisible(chromedp.CSS(`#pane-task`)),
			chromedp.ScrollIntoView(chromedp.CSS(`#answer-step-named`)),
			chromedp.WaitVisible(chromedp.CSS(`#answer-step-named`)),
			sh.take("notes-"+name),
		)
		b, err := chromedp.Evaluate[box](measureField)(ctx, chromedp.FromContext(ctx).Target)
		if err != nil {
			t.Fatal(err)
		}
		if b.W < 200 || b.X < b.PaneX-0.5 || b.X+b.W > b.PaneX+b.PaneW+0.5 || b.ScrollW > b.InnerW+0.5 {
			t.Errorf("%s: the answer field (%.0f wide at %.0f) does not fit the task pane (%.0f wide at %.0f), or the page scrolls sideways (%.0f in %.0f)",
				name, b.W, b.X, b.PaneW, b.PaneX, b.ScrollW, b.InnerW)
		}
		doStep(t, ctx, sh, "type and save an answer at "+name, quick,
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#answer-step-named').value = ''`),
			chromedp.SendKeys(chromedp.CSS(`#answer-step-named`), answer),
			waitText(`form[data-check="step-named"] .answer-status`, "Not saved yet"),
			click(`form[data-check="step-named"] button`),
			waitText(`form[data-check="step-named"] .answer-status`, "Saved: Check my work grades it."),
			sh.take("notes-saved-"+name),
		)
		if m, _ := l.fa.Answers(context.Background(), 1); m["step-named"] != answer {
			t.Errorf("%s: saved answers %v", name, m)
		}
		doStep(t, ctx, sh, "reload at "+name, quick,
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(`#answer-step-named`)),
		)
		after, err := chromedp.Value(chromedp.CSS(`#answer-step-named`))(ctx, chromedp.FromContext(ctx).Target)
		if err != nil {
			t.Fatal(err)
		}
		if after != answer {
			t.Errorf("%s: after a reload the field holds %q, want %q", name, after, answer)
		}
	}
	// An answer too long for the lab is refused with the reason, in place.
	doStep(t, ctx, sh, "a refused answer", quick,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#answer-what-it-showed').removeAttribute('maxlength'); document.querySelector('#answer-what-it-showed').value = 'x'.repeat(2100)`),
		click(`form[data-check="what-it-showed"] button`),
		waitText(`form[data-check="what-it-showed"] .answer-status`, "Your answer was not saved"),
		sh.take("notes-refused"),
	)
}
