// The class pages, kept live from the class's event stream
// (/class/ID/events): first a snapshot of what the person may see — the
// whole board for the instructor, their own row for a learner — then each
// change (a learner joined, a cell, a lab, a message).

const root = document.getElementById("class");
const role = root && root.dataset.role;
const classID = root && root.dataset.class;
let snap = null;

const cellLabels = { "not-started": "not started", working: "working", passing: "checks passing", solved: "solved" };

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function labLabel(lab) {
  if (!lab || !lab.state) return "not started";
  if (lab.state === "queued") return `queued: number ${lab.position}`;
  return lab.state;
}

function minutesLeft(lab) {
  if (!lab || lab.state !== "ready" || !lab.expiresAt) return "";
  const m = Math.round((new Date(lab.expiresAt) - Date.now()) / 60000);
  return m > 0 ? `${m} min left` : "ending";
}

function hhmm(t) {
  const d = new Date(t);
  return isNaN(d) ? "" : d.toISOString().slice(11, 16);
}

function duration(ns) {
  const s = Math.round((ns || 0) / 1e9);
  if (s < 60) return `${s}s`;
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
}

function messageItem(m) {
  return h("li", { class: "msg-" + m.kind, "data-kind": m.kind },
    h("span", { class: "muted" }, hhmm(m.at)), " ",
    m.kind === "hint" ? [h("strong", {}, "Hint"), m.scenario ? h("span", { class: "muted" }, ` (${m.scenario})`) : null, " "] : null,
    role === "learner" && m.to ? [h("span", { class: "muted" }, "to you"), " "] : null,
    role === "instructor" ? h("span", { class: "muted" }, m.to ? `to ${learnerName(m.to)} ` : "to everyone ") : null,
    m.body);
}

function learnerName(id) {
  const r = snap && snap.rows.find((r) => r.learner.id === id);
  return r ? r.learner.name : id;
}

function apply(u) {
  const rowOf = (id) => snap.rows.find((r) => r.learner.id === id);
  switch (u.kind) {
    case "learner": {
      const i = snap.rows.findIndex((r) => r.learner.id === u.learner);
      if (i >= 0) snap.rows[i] = u.row; else snap.rows.push(u.row);
      break;
    }
    case "cell": {
      const r = rowOf(u.learner);
      const i = snap.scenarios.indexOf(u.cell.scenario);
      if (r && i >= 0) r.cells[i] = u.cell;
      break;
    }
    case "lab": {
      const r = rowOf(u.learner);
      if (r) r.lab = u.lab;
      if (role === "learner" && u.labEvent && u.labEvent.message) {
        const ev = document.getElementById("lab-event");
        if (ev) { ev.textContent = u.labEvent.message; ev.dataset.kind = u.labEvent.kind; }
      }
      break;
    }
    case "message":
      snap.messages.push(u.message);
      break;
  }
}

function renderMessages() {
  const list = document.getElementById("messages");
  if (list) list.replaceChildren(...snap.messages.map(messageItem));
}

function renderLearner() {
  const me = snap.rows[0];
  if (!me) return;
  document.getElementById("me").textContent = me.learner.name;
  const lab = me.lab || {};
  const box = document.getElementById("lab");
  const canStart = !lab.state || lab.state === "ended" || lab.state === "failed";
  // replaceChildren would write a null as the text "null".
  box.replaceChildren(...[
    h("p", {}, "Your lab: ", h("strong", { id: "lab-state", class: "lab-" + (lab.state || "") }, labLabel(lab)),
      lab.cluster ? [" · cluster ", h("code", { id: "lab-cluster" }, lab.cluster)] : null,
      minutesLeft(lab) ? [" · ", h("span", { id: "lab-expires" }, minutesLeft(lab))] : null),
    lab.reason ? h("p", { class: "muted", id: "lab-reason" }, lab.reason) : null,
    canStart ? h("form", { method: "post", action: `/class/${classID}/lab`, id: "lab-form" }, h("button", { class: "primary", type: "submit" }, "Start my lab")) : null,
  ].filter(Boolean));
  box.dataset.live = "true"; // drawn from the event stream
  const rows = document.querySelectorAll("#my-scenarios tbody tr");
  rows.forEach((tr) => {
    const i = snap.scenarios.indexOf(tr.dataset.scenario);
    const c = me.cells[i];
    if (!c) return;
    const tds = tr.querySelectorAll("td");
    tds[1].textContent = cellLabels[c.state] || c.state;
    tds[1].className = "cell-" + c.state;
    tds[2].textContent = String(c.hintsUsed || 0);
    tds[3].textContent = c.lastCheck ? (c.lastCheck.text || `${Math.round(c.lastCheck.score)}%`) : "";
  });
  renderMessages();
}

async function post(url, body) {
  const resp = await fetch(url, { method: "POST", headers: { Accept: "application/json" }, body });
  let out;
  try { out = await resp.json(); } catch (e) { out = {}; }
  if (!resp.ok && !out.error) out.error = `${resp.status} ${resp.statusText}`;
  return out;
}

function renderBoard() {
  const head = h("tr", {}, h("th", {}, "Learner"), h("th", {}, "Lab"),
    snap.scenarios.map((id) => h("th", { "data-scenario": id }, id)), h("th", {}, ""));
  const body = snap.rows.map((r) => {
    const lab = r.lab || {};
    return h("tr", { "data-learner": r.learner.id },
      h("td", { class: "learner" }, r.learner.name),
      h("td", { class: "lab-" + (lab.state || ""), title: lab.reason || "" }, labLabel(lab), minutesLeft(lab) ? h("div", { class: "muted" }, minutesLeft(lab)) : null),
      r.cells.map((c) => h("td", { class: "cell cell-" + c.state, "data-scenario": c.scenario, "data-state": c.state,
        title: c.lastCheck ? c.lastCheck.results.map((x) => (x.passed ? "✓ " : "✗ ") + x.message).join("\n") : "" },
        h("a", { href: `/class/${classID}/learners/${r.learner.id}/scenarios/${c.scenario}` }, cellLabels[c.state] || c.state),
        c.state !== "not-started" ? h("div", { class: "muted" },
          `${duration(c.timeSpent)} · ${c.hintsUsed} hint${c.hintsUsed === 1 ? "" : "s"}` + (c.lastCheck ? ` · ${c.lastCheck.text || Math.round(c.lastCheck.score) + "%"}` : "")) : null)),
      h("td", {},
        h("button", { type: "button", class: "extend", onclick: () => labAction(r.learner.id, "extend?minutes=30") }, "+30 min"), " ",
        h("button", { type: "button", class: "reset", onclick: () => { if (confirm(`Give ${r.learner.name} a fresh cluster? Their work on the current one is lost.`)) labAction(r.learner.id, "reset"); } }, "Reset lab")));
  });
  document.querySelector("#board thead").replaceChildren(head);
  document.querySelector("#board tbody").replaceChildren(...body);
  const to = document.querySelector("#push-form select[name=to]");
  const chosen = to.value;
  to.replaceChildren(h("option", { value: "" }, "everyone"), ...snap.rows.map((r) => h("option", { value: r.learner.id }, r.learner.name)));
  to.value = chosen;
  renderMessages();
}

async function labAction(learner, action) {
  const r = await post(`/class/${classID}/learners/${learner}/${action}`);
  document.getElementById("board-status").textContent = r.error ? r.error : "";
}

function render() {
  if (!snap) return;
  if (role === "instructor") renderBoard(); else renderLearner();
}

function status(text) {
  const el = document.getElementById("board-status");
  if (el) el.textContent = text;
}

function connect() {
  const proto = location.protocol === "https:" ? "wss://" : "ws://";
  const ws = new WebSocket(proto + location.host + root.dataset.ws);
  ws.onopen = () => status("live");
  ws.onmessage = (ev) => {
    const f = JSON.parse(ev.data);
    if (f.kind === "snapshot") {
      snap = f.snapshot;
      // Empty lists arrive as null.
      snap.rows = snap.rows || [];
      snap.messages = snap.messages || [];
      snap.scenarios = snap.scenarios || [];
    }
    else if (snap) apply(f.update);
    render();
  };
  ws.onclose = (ev) => {
    status("disconnected" + (ev.reason ? ": " + ev.reason : "") + "; reconnecting …");
    setTimeout(connect, 2000);
  };
}

// examClock counts the exam's time down; when it runs out the server
// grades the exam, and the page reloads to show the score.
function examClock() {
  const ex = document.getElementById("exam");
  if (!ex || ex.dataset.state !== "running") return;
  const left = document.getElementById("exam-left");
  const tick = () => {
    const ms = new Date(ex.dataset.deadline) - Date.now();
    if (ms <= 0) {
      left.textContent = "time is up: grading …";
      setTimeout(() => location.reload(), 3000);
      return false;
    }
    const s = Math.floor(ms / 1000);
    left.textContent = `${Math.floor(s / 3600) ? Math.floor(s / 3600) + ":" : ""}${String(Math.floor(s / 60) % 60).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
    return true;
  };
  if (tick()) {
    const id = setInterval(() => { if (!tick()) clearInterval(id); }, 1000);
  }
}

function init() {
  if (!root) return;
  examClock();
  const form = document.getElementById("push-form");
  if (form) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const out = document.getElementById("push-status");
      const r = await post(`/class/${classID}/push`, new URLSearchParams(new FormData(form)));
      out.textContent = r.error ? r.error : "sent";
      if (!r.error) form.querySelector("textarea").value = "";
    });
  }
  connect();
  setInterval(render, 30000); // the minutes left
}

init();
