package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// layout is what a person sees of the workspace, measured in the page.
type layout struct {
	InnerW, InnerH   float64
	ScrollW, ScrollH float64
	Narrow           bool
	Cols, Rows       int
	Term, View, Task rect
	// TaskVisible: the task pane is on screen (beside the terminal, or
	// as the selected tab).
	TaskVisible bool
	ActiveTab   string
	// Lowest is the element that reaches furthest down the page, not
	// clipped by a pane of its own (tag, id, classes and its bottom
	// edge), to say what makes it scroll.
	Lowest string
}

type rect struct{ X, Y, W, H float64 }

func (r rect) String() string { return fmt.Sprintf("%.0fx%.0f at %.0f,%.0f", r.W, r.H, r.X, r.Y) }

const measure = `(() => {
	const box = (sel) => { const e = document.querySelector(sel); if (!e || e.offsetParent === null) return {X:0,Y:0,W:0,H:0};
		const r = e.getBoundingClientRect(); return {X:r.x, Y:r.y, W:r.width, H:r.height}; };
	const t = window.svclabTerminals && Object.values(window.svclabTerminals).find((x) => x.term.element && x.term.element.offsetParent !== null);
	const tab = document.querySelector('#views-tabs [aria-selected=true]');
	const active = document.querySelector('#views-body > .active');
	const task = box('#pane-task');
	return {InnerW: innerWidth, InnerH: innerHeight, ScrollW: document.documentElement.scrollWidth, ScrollH: document.documentElement.scrollHeight,
		Narrow: document.getElementById('workspace').classList.contains('narrow'),
		Cols: t ? t.term.cols : 0, Rows: t ? t.term.rows : 0,
		Term: box('#pane-terminal .term-panes'), View: active && active.id !== 'pane-task' ? box('#views-body') : {X:0,Y:0,W:0,H:0}, Task: task,
		TaskVisible: task.W > 0 && task.H > 0, ActiveTab: tab ? tab.id : '', Lowest: lowest()};
	function lowest() {
		let best = null, bottom = -1;
		const clipped = (e) => { for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) { if (getComputedStyle(p).overflowY !== 'visible') return true; } return false; };
		for (const e of document.body.querySelectorAll('*')) {
			if (clipped(e)) continue;
			const r = e.getBoundingClientRect();
			if (r.height > 0 && r.bottom + scrollY > bottom) { best = e; bottom = r.bottom + scrollY; }
		}
		return best ? best.tagName.toLowerCase() + (best.id ? '#' + best.id : '') + (best.className && best.className.baseVal === undefined ? '.' + String(best.className).trim().split(/\s+/).join('.') : '') + ' down to ' + Math.round(bottom) : '';
	}
})()`

// measureLayout measures the page once its layout has settled: two
// measurements a frame apart that agree (a page still placing its panes
// right after load is not what a person looks at).
func measureLayout(ctx context.Context) (layout, error) {
	var last layout
	for i := 0; i < 20; i++ {
		got, err := chromedp.Evaluate[layout](measure)(ctx, chromedp.FromContext(ctx).Target)
		if err != nil {
			return layout{}, err
		}
		if i > 0 && got == last {
			return got, nil
		}
		last = got
		time.Sleep(100 * time.Millisecond)
	}
	return last, nil
}

// inside says whether r lies within the window and is big enough to use.
func (l layout) inside(r rect, minW, minH float64) bool {
	return r.W >= minW && r.H >= minH && r.X >= 0 && r.Y >= 0 && r.X+r.W <= l.InnerW+0.5 && r.Y+r.H <= l.InnerH+0.5
}

// TestBrowserWorkspace looks at the scenario page the way a learner does,
// at a laptop's and a narrow window's size: no page scroll either way, the
// terminal at 80 columns or more beside a live view, the task at hand; the
// splitters move with the mouse and the keyboard, the terminal refits, and
// the page remembers the layout.
func TestBrowserWorkspace(t *testing.T) {
	ctx, cancel := context.WithTimeout(browser(t), 3*time.Minute)
	defer cancel()
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	sh := &shots{t: t, dir: artifactsDir(t)}
	ready := chromedp.Steps(
		chromedp.WaitVisible(chromedp.CSS(`#pane-terminal .xterm`)),
		waitJS(`window.svclabTerminals && Object.values(window.svclabTerminals).some((x) => x.ws.readyState === 1 && x.term.cols > 10)`),
		waitText(`#views-status`, "live"),
	)
	for _, size := range []struct {
		w, h   int64
		narrow bool
	}{{1280, 800, false}, {1400, 900, false}, {800, 900, true}} {
		name := fmt.Sprintf("%dx%d", size.w, size.h)
		doStep(t, ctx, sh, "open the workspace at "+name, quick,
			chromedp.EmulateViewport(size.w, size.h),
			chromedp.Navigate(l.url+"/scenarios/selector-typo"),
			chromedp.Evaluate[chromedp.Void](`localStorage.clear()`),
			chromedp.Reload(),
			ready,
			sh.take("workspace-"+name),
		)
		got, err := measureLayout(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", name, got)
		if got.ScrollH > got.InnerH+0.5 || got.ScrollW > got.InnerW+0.5 {
			t.Errorf("%s: the page scrolls: %.0fx%.0f in a %.0fx%.0f window (lowest: %s)", name, got.ScrollW, got.ScrollH, got.InnerW, got.InnerH, got.Lowest)
		}
		if got.Cols < 80 {
			t.Errorf("%s: the terminal has %d columns, want at least 80", name, got.Cols)
		}
		if got.Rows < 10 {
			t.Errorf("%s: the terminal has %d rows", name, got.Rows)
		}
		if !got.inside(got.Term, 600, 150) {
			t.Errorf("%s: the terminal is not in view: %s", name, got.Term)
		}
		if !size.narrow && !got.inside(got.View, 300, 200) {
			t.Errorf("%s: no live view in view beside the terminal: %s (tab %s)", name, got.View, got.ActiveTab)
		}
		if got.Narrow != size.narrow {
			t.Errorf("%s: narrow layout %v, want %v", name, got.Narrow, size.narrow)
		}
		if !size.narrow && (!got.TaskVisible || !got.inside(got.Task, 240, 300) || got.Task.X+got.Task.W > got.Term.X) {
			t.Errorf("%s: the task pane is not beside the terminal: task %s, terminal %s", name, got.Task, got.Term)
		}
		if size.narrow {
			// The task is the views' first tab, selected at first.
			if got.ActiveTab != "tab-task" || !got.TaskVisible || got.Task.Y < got.Term.Y+got.Term.H {
				t.Errorf("%s: the task is not the selected tab below the terminal: tab %s, task %s", name, got.ActiveTab, got.Task)
			}
			doStep(t, ctx, sh, "switch to the rules tab at "+name, quick,
				click(`#tab-rules`),
				waitJS(`document.querySelector('#panel-rules').offsetParent !== null && document.querySelector('#pane-task').offsetParent === null`),
				waitText(`#panel-rules`, "rejected (no endpoints)"),
				sh.take("narrow-rules"),
			)
			rules, _ := measureLayout(ctx)
			if !rules.inside(rules.View, 600, 200) || !rules.inside(rules.Term, 600, 150) || rules.Cols < 80 {
				t.Errorf("%s, rules tab: view %s, terminal %s with %d columns", name, rules.View, rules.Term, rules.Cols)
			}
		}
	}

	// 200 % zoom on a 1280x800 screen is a 640x400 window: the page may
	// scroll down, never sideways; the terminal, the views and the task
	// stay usable.
	doStep(t, ctx, sh, "open the workspace at 200 % zoom", quick,
		chromedp.EmulateViewport(640, 400),
		chromedp.Navigate(l.url+"/scenarios/selector-typo"),
		chromedp.Evaluate[chromedp.Void](`localStorage.clear()`),
		chromedp.Reload(),
		ready,
		sh.take("zoom-200"),
	)
	zoomed, err := measureLayout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("640x400: %+v", zoomed)
	if zoomed.ScrollW > zoomed.InnerW+0.5 || !zoomed.Narrow || zoomed.Cols < 70 || zoomed.Rows < 8 || zoomed.Term.W < 560 {
		t.Errorf("at 200 %% zoom: page %.0f wide in %.0f, narrow %v, terminal %s with %dx%d", zoomed.ScrollW, zoomed.InnerW, zoomed.Narrow, zoomed.Term, zoomed.Cols, zoomed.Rows)
	}
	fontPx, err := chromedp.Evaluate[float64](`parseFloat(getComputedStyle(document.querySelector('#task')).fontSize)`)(ctx, chromedp.FromContext(ctx).Target)
	if err != nil || fontPx < 14 {
		t.Errorf("the task's text is %.1fpx at 200 %% zoom (%v)", fontPx, err)
	}

	// At 1280x800: the splitters, by mouse and by keyboard.
	doStep(t, ctx, sh, "back at 1280x800", quick,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(l.url+"/scenarios/selector-typo"),
		chromedp.Evaluate[chromedp.Void](`localStorage.clear()`),
		chromedp.Reload(),
		ready,
	)
	before, _ := measureLayout(ctx)
	split, err := chromedp.Evaluate[rect](`(() => { const r = document.querySelector('#split-term').getBoundingClientRect(); return {X:r.x, Y:r.y, W:r.width, H:r.height}; })()`)(ctx, chromedp.FromContext(ctx).Target)
	if err != nil {
		t.Fatal(err)
	}
	x, y := split.X+split.W/2, split.Y+split.H/2
	doStep(t, ctx, sh, "drag the terminal's splitter down", quick,
		chromedp.MouseEvent(chromedp.MouseMoved, x, y),
		chromedp.MouseEvent(chromedp.MousePressed, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
		chromedp.MouseEvent(chromedp.MouseMoved, x, y+60, chromedp.ButtonLeft),
		chromedp.MouseEvent(chromedp.MouseMoved, x, y+120, chromedp.ButtonLeft),
		chromedp.MouseEvent(chromedp.MouseReleased, x, y+120, chromedp.ButtonLeft, chromedp.ClickCount(1)),
		waitJS(fmt.Sprintf(`Object.values(window.svclabTerminals).some((x) => x.term.rows > %d)`, before.Rows+3)),
		sh.take("dragged"),
	)
	dragged, _ := measureLayout(ctx)
	if dragged.Term.H < before.Term.H+100 || dragged.Rows <= before.Rows {
		t.Errorf("after dragging 120px down: terminal %s, %d rows (before %s, %d rows)", dragged.Term, dragged.Rows, before.Term, before.Rows)
	}
	// Remembered across a reload.
	doStep(t, ctx, sh, "reload", quick, chromedp.Reload(), ready)
	reloaded, _ := measureLayout(ctx)
	if d := reloaded.Term.H - dragged.Term.H; d < -2 || d > 2 {
		t.Errorf("after a reload the terminal is %s, it was %s", reloaded.Term, dragged.Term)
	}
	// The keyboard: the task pane's splitter, focused, moves with the
	// arrow keys; the terminal refits to the width it gets.
	doStep(t, ctx, sh, "widen the task pane with the keyboard", quick,
		chromedp.Focus(chromedp.CSS(`#split-task`)),
		chromedp.KeyEvent(kb.ArrowRight),
		chromedp.KeyEvent(kb.ArrowRight),
		waitJS(fmt.Sprintf(`document.querySelector('#pane-task').getBoundingClientRect().width > %f`, reloaded.Task.W+40)),
		waitJS(fmt.Sprintf(`Object.values(window.svclabTerminals).some((x) => x.term.element.offsetParent !== null && x.term.cols < %d)`, reloaded.Cols)),
		sh.take("task-wider"),
	)
	wider, _ := measureLayout(ctx)
	if wider.Cols < 80 {
		t.Errorf("the terminal fell to %d columns", wider.Cols)
	}
	// As far as it goes: the terminal keeps its 80 columns.
	doStep(t, ctx, sh, "the task pane as wide as it goes", quick,
		chromedp.Focus(chromedp.CSS(`#split-task`)),
		chromedp.KeyEvent(kb.End),
		sh.take("task-widest"),
	)
	widest, _ := measureLayout(ctx)
	if widest.Cols < 80 || widest.ScrollW > widest.InnerW+0.5 {
		t.Errorf("with the task pane at its widest: %d columns, page %.0f wide in %.0f", widest.Cols, widest.ScrollW, widest.InnerW)
	}
	focus, err := chromedp.Evaluate[string](`getComputedStyle(document.activeElement).outlineStyle + " " + document.activeElement.id`)(ctx, chromedp.FromContext(ctx).Target)
	if err != nil || focus != "solid split-task" {
		t.Errorf("the focused splitter shows no focus ring: %q %v", focus, err)
	}
	// The views' tabs work from the keyboard too.
	doStep(t, ctx, sh, "views tabs by keyboard", quick,
		chromedp.Focus(chromedp.CSS(`#views-tabs [aria-selected=true]`)),
		chromedp.KeyEvent(kb.ArrowRight),
		waitJS(`document.activeElement.id === 'tab-rules' && document.activeElement.getAttribute('aria-selected') === 'true'`),
		waitJS(`document.querySelector('#panel-rules').offsetParent !== null`),
		click(`#tab-all`),
		waitJS(`[...document.querySelectorAll('#views-body > .panel')].every((p) => p.offsetParent !== null)`),
		sh.take("all-views"),
	)
}
