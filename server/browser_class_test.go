package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/svclab/svclab/lab/class"
)

// TestBrowserClassroom is the classroom's acceptance walk in chromium, on
// embedded clusters: an instructor and three learners, each in a browser
// context of their own. Cid and Ann start labs; the class has room for two,
// so Bob queues. Ann solves selector-typo in her browser terminal and the
// instructor's board shows it live; the instructor watches Ann's terminal
// read-only and pushes a hint to Bob, which reaches Bob's page. Cid never
// touches his lab: it is reclaimed when idle (a minute; Ann's follows a
// minute after her last command), and Bob's lab starts from the queue.
func TestBrowserClassroom(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end: needs root for embedded clusters")
	}
	chromium(t)
	ec := newEmbeddedClass(t, class.Spec{Name: "uiclass", Scenarios: []string{"selector-typo"}, Capacity: 2, IdleTimeout: time.Minute, TimeLimit: time.Hour})
	id := ec.created.Class.ID
	classURL := ec.url + "/class/" + id + "/"

	// Everyone has a browser of their own (their own cookies). Not tabs
	// of one browser: with chromedp v0.23, a tab stops answering once
	// another tab of its browser has run an action.
	type person struct {
		name string
		ctx  context.Context
		sh   *shots
	}
	newPerson := func(name string) *person {
		pctx := browser(t)
		dir := filepath.Join(artifactsDir(t), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return &person{name: name, ctx: pctx, sh: &shots{t: t, dir: dir}}
	}
	step := func(p *person, what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		doStep(t, p.ctx, p.sh, p.name+": "+what, timeout, actions...)
	}
	join := func(p *person) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			chromedp.Navigate(ec.url+"/join?code="+ec.created.Class.JoinCode),
			chromedp.SendKeys(chromedp.CSS(`#join-form input[name="name"]`), p.name),
			click(`#join-form button`),
			waitText(`#me`, p.name))
	}
	teacher, ann, bob, cid := newPerson("instructor"), newPerson("Ann"), newPerson("Bob"), newPerson("Cid")
	var annSize string // her terminal's columns x rows

	step(teacher, "sign in and open the board", quick,
		chromedp.Navigate(ec.url+"/class/"+id+"/instructor"),
		chromedp.SendKeys(chromedp.CSS(`#instructor-form input[name="token"]`), ec.created.InstructorToken),
		click(`#instructor-form button`),
		waitText(`#board-status`, "live"),
		waitText(`#join-code`, ec.created.Class.JoinCode),
		teacher.sh.take("board-empty"))
	step(cid, "join and start a lab", quick, join(cid),
		click(`#lab-form button`),
		waitText(`#lab-state`, "start"))
	step(ann, "join and start a lab", quick, join(ann),
		click(`#lab-form button`),
		waitText(`#lab-state`, "start"))
	step(bob, "join, start a lab and queue: the class has room for two", quick, join(bob),
		click(`#lab-form button`),
		waitText(`#lab-state`, "queued: number 1"),
		// Once redrawn from the event stream, the panel has no stray
		// "null" where it has no reason or no button.
		waitJS(`document.getElementById("lab").dataset.live === "true" && !/null/.test(document.getElementById("lab").innerText)`),
		bob.sh.take("queued"))
	step(teacher, "the board shows the three learners and the queue", quick,
		waitJS(`document.querySelectorAll('#board tbody tr').length === 3`),
		waitText(`#board tbody`, "queued: number 1"),
		teacher.sh.take("board-three"))
	step(ann, "her lab is ready", slow, waitText(`#lab-state`, "ready"))
	step(ann, "open selector-typo and start it on her lab", slow,
		click(`#my-scenarios a`),
		chromedp.WaitVisible(chromedp.CSS(`#start-form`)),
		click(`#start-form button`),
		notFailed(),
		waitText(`#panel-slices`, "No endpoints"),
		ann.sh.take("broken"))
	step(teacher, "the board shows Ann working", quick,
		waitJS(fmt.Sprintf(`[...document.querySelectorAll('#board tbody tr')].some(r => r.querySelector('.learner').innerText === %q && r.querySelector('td.cell').dataset.state === "working")`, "Ann")))
	step(ann, "fix the Service in the terminal and check", quick,
		waitText(`.term-pane:not([hidden]) .xterm-rows`, "control-plane"),
		typeLine(`kubectl -n shop patch service web --type=merge -p '{"spec":{"selector":{"app":"web"}}}'`),
		waitText(`.term-pane:not([hidden]) .xterm-rows`, "service/web patched"),
		waitJS(`document.querySelectorAll('#panel-slices tr[data-endpoint]').length === 2`),
		// As a learner would: check once the traffic panel shows every
		// source getting through (each node's proxier has synced).
		waitJS(`(() => { const ps = [...document.querySelectorAll('#panel-probes .latest .probe')]; return ps.length >= 4 && ps.every(p => p.dataset.outcome === "success"); })()`),
		click(`#check`),
		waitText(`#check-results`, "Every check passed"),
		ann.sh.take("passed"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			annSize, err = chromedp.Evaluate[string](visibleTermSize)(ctx, tg)
			return err
		}))
	step(teacher, "the board shows Ann's solve live", quick,
		waitJS(`[...document.querySelectorAll('#board tbody tr')].some(r => r.querySelector('.learner').innerText === "Ann" && r.querySelector('td.cell').dataset.state === "solved")`),
		teacher.sh.take("board-solved"))
	step(teacher, "watch Ann's terminal read-only", quick,
		// A smaller window than Ann's.
		chromedp.EmulateViewport(1000, 700),
		click(`#board tbody tr:nth-child(2) td.cell a`),
		waitText(`.term-pane:not([hidden]) .xterm-rows`, "service/web patched"),
		waitText(`.term-pane:not([hidden]) .xterm-rows`, "read-only"),
		// At Ann's size, whatever the instructor's window: her shell drew
		// for hers.
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			got, err := chromedp.Evaluate[string](visibleTermSize)(ctx, tg)
			if err == nil && got != annSize {
				err = fmt.Errorf("the read-only terminal is %s, Ann's is %s", got, annSize)
			}
			return err
		}),
		chromedp.WaitNotPresent(chromedp.CSS(`#check`)),
		teacher.sh.take("watching-ann"),
		chromedp.Navigate(ec.url+"/class/"+id+"/board"),
		waitText(`#board-status`, "live"))
	step(teacher, "push a hint to Bob", quick,
		chromedp.SetValue(chromedp.CSS(`#push-form select[name="kind"]`), "hint"),
		chromedp.SetValue(chromedp.CSS(`#push-form select[name="scenario"]`), "selector-typo"),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#push-form select[name="to"]'); s.value = [...s.options].find(o => o.text === "Bob").value; })()`),
		chromedp.SendKeys(chromedp.CSS(`#push-form textarea`), "Compare the Service's selector with the Pods' labels."),
		click(`#push-form button`),
		waitText(`#push-status`, "sent"))
	step(bob, "the hint arrives", quick,
		waitText(`#messages`, "Compare the Service's selector"),
		bob.sh.take("hint"))
	step(ann, "Bob's hint does not reach Ann", quick,
		chromedp.Navigate(classURL),
		waitText(`#me`, "Ann"),
		chromedp.WaitReady(chromedp.CSS(`#messages`)),
		waitJS(`!document.querySelector('#messages').innerText.includes("Compare the Service's selector")`))
	step(cid, "his idle lab is reclaimed", 3*time.Minute,
		waitText(`#lab-state`, "ended"),
		waitText(`#lab-reason`, "idle"),
		cid.sh.take("reclaimed"))
	step(bob, "his lab starts from the queue", slow,
		waitJS(`["starting", "ready"].includes(document.querySelector('#lab-state').innerText)`),
		bob.sh.take("lab-from-queue"))
	step(teacher, "the board shows Cid's lab ended and Bob's started", quick,
		waitJS(`(() => { const rows = [...document.querySelectorAll('#board tbody tr')]; const lab = (n) => rows.find(r => r.querySelector('.learner').innerText === n).children[1].innerText; return lab("Cid").startsWith("ended") && !lab("Bob").startsWith("queued"); })()`),
		teacher.sh.take("board-end"))
}
