// The live panels of a scenario page, fed by one websocket of view frames:
// {"topic":"slices"|"rules/NODE"|"conntrack/NODE"|"probes"|"timeline"|"path"|"nodes", "data":{…}}
import { ProbeChart } from "./chart.js";

const $ = (sel, el = document) => el.querySelector(sel);
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v; else if (k.startsWith("data-")) el.setAttribute(k, v); else el[k] = v;
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}

const state = { nodes: [], rules: {}, conntrack: {}, node: null, raw: false, services: [] };

function renderSlices(data) {
  const el = $("#panel-slices .body");
  el.replaceChildren();
  state.services = data.services || [];
  for (const s of state.services) {
    el.append(h("h4", {}, s.service, " ", h("span", { class: "muted" }, s.missing ? "(no such Service)" : `ClusterIP ${s.clusterIP} · selector ${s.selector || "(none)"}`)));
    const slices = s.slices || [];
    if (!slices.length) { el.append(h("p", { class: "empty" }, "No EndpointSlice.")); continue; }
    for (const sl of slices) {
      const eps = sl.endpoints || [];
      const ports = (sl.ports || []).map((p) => `${p.name || ""}${p.name ? " " : ""}${p.port}/${p.protocol}`).join(", ");
      el.append(h("div", { class: "muted" }, `EndpointSlice ${sl.name} · ports ${ports || "none"}`));
      if (!eps.length) { el.append(h("p", { class: "empty", "data-slice-empty": "true" }, "No endpoints: the selector matches no ready Pod.")); continue; }
      const tb = h("tbody");
      for (const e of eps) {
        tb.append(h("tr", { class: e.change ? "chg-" + e.change : "", "data-endpoint": e.address },
          h("td", {}, e.address), h("td", {}, e.target || ""), h("td", { class: e.ready ? "ok" : "bad" }, String(e.ready)),
          h("td", { class: e.serving ? "ok" : "bad" }, String(e.serving)), h("td", {}, String(e.terminating)),
          h("td", {}, e.nodeName || ""), h("td", {}, e.zone || ""), h("td", {}, e.hints || "")));
      }
      el.append(h("table", { class: "grid" }, h("thead", {}, h("tr", {}, ["address", "pod", "ready", "serving", "terminating", "node", "zone", "hints"].map((c) => h("th", {}, c)))), tb));
    }
  }
  fillPathForm();
}

function nodeTabs(panel, kind) {
  const bar = $(`#${panel} .nodes`);
  if (!bar) return;
  bar.replaceChildren(...state.nodes.map((n) => {
    const b = h("button", { type: "button", class: n === state.node ? "active" : "", "data-node": n }, n.replace(/^.*?-(control-plane|worker\d*)$/, "$1"));
    b.title = n;
    b.onclick = () => { state.node = n; renderAllNodes(); };
    return b;
  }));
}

function renderRules() {
  nodeTabs("panel-rules");
  const el = $("#panel-rules .body");
  const v = state.rules[state.node];
  el.replaceChildren();
  if (!v) { el.append(h("p", { class: "empty" }, "Reading the rules …")); return; }
  if (v.error) el.append(problem(`The rules of ${v.node} could not be read.`, v.error));
  if (v.error && !v.mode) return;
  el.append(h("div", { class: "muted" }, `${v.node} · ${v.mode} · changed ${new Date(v.changed).toLocaleTimeString()}`));
  if (state.raw) { el.append(h("pre", { class: "raw" }, v.raw)); return; }
  for (const g of v.groups || []) {
    el.append(h("h4", {}, g.service, " ", h("span", { class: "muted", "data-summary": g.service }, g.summary)));
    let where = "";
    const pre = h("div", { class: "rules" });
    for (const l of g.lines || []) {
      if (l.where !== where) { where = l.where; pre.append(h("div", { class: "where" }, where)); }
      pre.append(h("div", { class: "rule " + (l.change ? "chg-" + l.change : "") }, (l.change === "added" ? "+ " : l.change === "removed" ? "− " : "  ") + l.text));
    }
    if (!(g.lines || []).length) pre.append(h("div", { class: "empty" }, "No rules for this Service on this node."));
    el.append(pre);
  }
}

function renderConntrack() {
  nodeTabs("panel-conntrack");
  const el = $("#panel-conntrack .body");
  const v = state.conntrack[state.node];
  el.replaceChildren();
  if (!v) { el.append(h("p", { class: "empty" }, "Reading conntrack …")); return; }
  if (v.error) el.append(problem(`The connections of ${v.node} could not be read.`, v.error));
  const rows = v.entries || [];
  if (!rows.length) { el.append(h("p", { class: "empty" }, "No connections to the scenario's Services on " + v.node + ".")); return; }
  const tb = h("tbody");
  for (const r of rows.slice(0, 100)) {
    tb.append(h("tr", { class: r.new ? "chg-added" : "" }, h("td", {}, r.proto), h("td", {}, r.state || ""), h("td", {}, r.src), h("td", {}, r.dst),
      h("td", {}, r.backend), h("td", {}, r.flags || ""), h("td", {}, r.ttl + "s")));
  }
  el.append(h("table", { class: "grid" }, h("thead", {}, h("tr", {}, ["proto", "state", "source", "Service", "answered by", "flags", "ttl"].map((c) => h("th", {}, c)))), tb));
  if (rows.length > 100) el.append(h("p", { class: "muted" }, `${rows.length - 100} more`));
}

function renderAllNodes() { renderRules(); renderConntrack(); }

let chart;
function renderProbes(data) {
  if (!chart) chart = new ProbeChart($("#panel-probes canvas"), $("#panel-probes .legend"));
  chart.add(data);
  const last = $("#panel-probes .latest");
  last.replaceChildren(...(data.results || []).map((r) => h("div", { class: "probe " + r.outcome, "data-source": r.source, "data-outcome": r.outcome },
    `${r.source} → ${r.target}: ${r.outcome}${r.backend ? " (" + r.backend + ")" : ""}${r.detail ? " — " + r.detail : ""} · ${r.ms} ms`)));
}

// The timeline lists the newest event first, in the order the events
// happened (a Kubernetes event may arrive after a later command).
function renderTimeline(ev) {
  const list = $("#panel-timeline ol");
  const at = Date.parse(ev.time) || Date.now();
  const li = h("li", { class: "tl-" + ev.kind + " lvl-" + (ev.level || "info"), "data-at": String(at) },
    h("time", { dateTime: ev.time }, new Date(at).toLocaleTimeString()), " ", h("span", { class: "kind" }, ev.kind), " ",
    ev.source ? h("span", { class: "muted" }, ev.source + " ") : null, ev.text);
  let before = null;
  for (const c of list.children) if (Number(c.dataset.at) <= at) { before = c; break; }
  list.insertBefore(li, before);
  while (list.children.length > 300) list.lastChild.remove();
}

// problem is an error as a learner reads it: what did not work, and the
// raw error behind a disclosure.
function problem(text, detail) {
  const p = h("div", { class: "problem" }, h("p", { class: "bad" }, text));
  if (detail && detail !== text) p.append(h("details", {}, h("summary", {}, "details"), h("pre", { class: "raw" }, detail)));
  return p;
}

// The lab's life: which attempt on which cluster the panels show, and its
// health in the strip. While the lab is down the panels are paused.
const life = { generation: "", cluster: "", down: false };

// leaving is set once the page goes elsewhere (a form posted): a socket
// that ends then must not reload the page under the navigation.
// (confirm.js sets window.svclabLeaving before it posts a form).
addEventListener("submit", () => { window.svclabLeaving = true; });
addEventListener("pagehide", () => { window.svclabLeaving = true; });

function onLab(d) {
  if (window.svclabLeaving) return;
  const box = $("#attempt");
  // Another attempt, or the cluster created again: the page shows the
  // new one from the start.
  if ((box && String(d.attempt) !== box.dataset.attempt) || (life.generation && life.generation !== d.generation)) { location.reload(); return; }
  life.generation = d.generation; life.cluster = d.cluster;
  for (const el of document.querySelectorAll("#views-body .panel")) {
    el.dataset.generation = d.generation;
    let g = $(".gen", el);
    if (!g) { g = h("span", { class: "gen muted" }); $("h3", el).append(g); }
    g.textContent = `cluster ${d.cluster} · life ${d.generation.slice(0, 8)}`;
    g.title = `What this panel shows comes from attempt ${d.attempt} on cluster ${d.cluster}, created as ${d.generation} (a cluster created again gets a new one).`;
  }
}

function renderHealth(hl) {
  const el = $("#lab-health");
  if (!el) return;
  el.dataset.state = hl.state;
  const parts = (hl.parts || []).map((p) => h("li", { class: p.skipped ? "skipped" : p.ok ? "ok" : "bad", "data-part": p.id },
    h("strong", {}, p.title), ": ", p.text, p.detail ? h("pre", { class: "raw" }, p.detail) : null));
  const kids = [h("span", { class: "health-dot", "aria-hidden": "true" }), h("span", { class: "health-text" }, hl.summary)];
  const open = $("#lab-health .health-details")?.open;
  kids.push(h("details", { class: "health-details", open }, h("summary", {}, "details"),
    h("div", { class: "health-pop" }, h("ul", {}, parts), h("p", { class: "muted" }, "Checked " + new Date(hl.checked || Date.now()).toLocaleTimeString()))));
  if (hl.startOver && $("#reset")) {
    const b = h("button", { type: "button", id: "health-start-over", class: "primary" }, "Start over");
    b.onclick = () => window.svclabConfirm?.("reset");
    kids.push(b);
  }
  el.replaceChildren(...kids);
  setDown(hl.state === "down", hl.summary);
}

function setDown(down, why) {
  life.down = down;
  const body = $("#views-body");
  if (!body) return;
  body.classList.toggle("paused", down);
  let veil = $("#views-paused");
  if (down) {
    if (!veil) { veil = h("div", { id: "views-paused", role: "status" }); body.append(veil); }
    veil.replaceChildren(h("strong", {}, "Paused: the lab is down."), " ", h("span", {}, "The panels show the lab again as soon as it answers."));
    $("#views-status").textContent = "paused"; $("#views-status").className = "bad";
  } else if (veil) veil.remove();
}

function fillPathForm() {
  const form = $("#path-form");
  if (!form) return;
  const svc = form.elements.service;
  const cur = svc.value;
  const opts = [];
  for (const s of state.services) {
    for (const p of s.ports || []) {
      if (s.clusterIP && s.clusterIP !== "None") opts.push(h("option", { value: `${s.clusterIP}|${p.protocol}|${p.port}` }, `${s.service} ${p.port}/${p.protocol} (ClusterIP ${s.clusterIP})`));
      if (p.nodePort) for (const n of state.nodeInfo || []) {
        opts.push(h("option", { value: `${n.ip}|${p.protocol}|${p.nodePort}` }, `${s.service} NodePort ${p.nodePort}/${p.protocol} on ${n.name} (${n.ip})`));
      }
    }
  }
  svc.replaceChildren(...opts);
  if (cur) svc.value = cur;
}

function renderPath(p) {
  const el = $("#panel-path .body");
  el.replaceChildren();
  if (p.error) { el.append(problem(p.error, p.detail)); return; }
  el.append(h("p", { class: "outcome-" + p.outcome, "data-outcome": p.outcome }, h("strong", {}, p.outcome.toUpperCase()), " — ", p.why));
  const ol = h("ol", { class: "path" });
  for (const s of p.steps || []) {
    ol.append(h("li", { class: s.matched ? "matched" : "skipped" }, h("span", { class: "muted" }, `${s.hook} › ${s.chain}`), h("code", {}, s.rule), h("div", {}, s.note)));
  }
  el.append(ol);
}

function connect(root) {
  const proto = location.protocol === "https:" ? "wss://" : "ws://";
  const ws = new WebSocket(proto + location.host + root.dataset.ws);
  const status = $("#views-status");
  ws.onopen = () => { status.textContent = "live"; status.className = "live"; };
  ws.onclose = (ev) => {
    if (window.svclabLeaving) return;
    if (ev.code === 4001) { status.textContent = "the lab changed — loading it"; location.reload(); return; }
    if (ev.code === 4002) { setTimeout(() => connect(root), 5000); return; }
    status.textContent = "disconnected — reconnecting"; status.className = "bad"; setTimeout(() => connect(root), 2000);
  };
  ws.onmessage = (ev) => {
    const f = JSON.parse(ev.data);
    const t = f.topic;
    window.svclabFrames = (window.svclabFrames || 0) + 1;
    if (t === "lab") { onLab(f.data); return; }
    if (t === "health") { renderHealth(f.data); return; }
    if (life.down) return; // paused: nothing the lab sends now holds
    if (t === "nodes") { state.nodeInfo = f.data; state.nodes = f.data.map((n) => n.name); if (!state.node) state.node = state.nodes.find((n) => /worker/.test(n)) || state.nodes[0]; renderAllNodes(); fillPathForm(); }
    else if (t === "slices") renderSlices(f.data);
    else if (t.startsWith("rules/")) { state.rules[t.slice(6)] = f.data; if (t.slice(6) === state.node) renderRules(); }
    else if (t.startsWith("conntrack/")) { state.conntrack[t.slice(10)] = f.data; if (t.slice(10) === state.node) renderConntrack(); }
    else if (t === "probes") renderProbes(f.data);
    else if (t === "timeline") renderTimeline(f.data);
    else if (t === "path") renderPath(f.data);
  };
  const form = $("#path-form");
  if (form) form.onsubmit = (e) => {
    e.preventDefault();
    const [dest, protocol, port] = form.elements.service.value.split("|");
    const [kind, source] = form.elements.source.value.split("|");
    ws.send(JSON.stringify({ type: "path", sourceName: source, fromNode: kind === "node", dest, protocol, port: Number(port) }));
  };
  window.svclabViews = ws;
}

// The scenario's buttons: Check my work and Show a hint answer with JSON.
async function post(url) {
  const resp = await fetch(url, { method: "POST", headers: { "Accept": "application/json" } });
  let body;
  try { body = await resp.json(); } catch (e) { body = { error: `${resp.status} ${resp.statusText}` }; }
  if (!resp.ok && !body.error) body.error = `${resp.status} ${resp.statusText}`;
  return body;
}

function initActions() {
  const box = $("#attempt");
  if (!box) return;
  const base = box.dataset.base;
  const check = $("#check"), hint = $("#hint"), results = $("#check-results");
  if (!check) return; // read-only
  check.onclick = async () => {
    check.disabled = true;
    results.replaceChildren(h("p", { class: "muted" }, "Checking … (probes take a few seconds)"));
    const r = await post(base + "/check");
    check.disabled = false;
    if (r.error) { results.replaceChildren(h("div", { class: "error-box" }, problem(r.error, r.detail))); return; }
    const rep = r.report;
    results.replaceChildren(
      h("p", { id: "check-verdict", "data-passed": String(rep.passed) }, rep.passed ? `✓ Every check passed. Score: ${r.scoreText}` : `Not there yet. Score: ${r.scoreText}`),
      h("ul", { class: "checks" }, rep.results.map((c) => h("li", { class: c.passed ? "pass" : "fail", "data-check": c.id, "data-passed": String(c.passed) },
        c.message, checkDetail(c)))));
    $("#score").textContent = "· Score: " + r.scoreText;
    for (const hn of r.hints || []) addHint(hn.index, hn.html, "shown because a check failed");
    $("#attempt-state").textContent = r.state;
    $("#attempt-state").className = "state-" + r.state;
    box.dataset.state = r.state;
    if (r.explanationHTML) $("#explanation").innerHTML = "<h3>Why it broke, and why the fix works</h3>" + r.explanationHTML;
  };
  if (hint) hint.onclick = async () => {
    hint.disabled = true;
    const r = await post(base + "/hint");
    if (r.error) { results.replaceChildren(h("p", { class: "error-box" }, r.error)); hint.disabled = false; return; }
    addHint(r.index, r.html);
  };
  // Answers save on their own, without leaving the page.
  for (const form of document.querySelectorAll("form.answer")) {
    const status = form.querySelector(".answer-status"), text = form.elements.text, save = form.querySelector("button");
    text.oninput = () => { status.textContent = "Not saved yet."; };
    form.onsubmit = async (e) => {
      e.preventDefault();
      save.disabled = true;
      status.textContent = "Saving …";
      const resp = await fetch(form.action, { method: "POST", headers: { "Accept": "application/json" }, body: new URLSearchParams(new FormData(form)) })
        .catch((err) => ({ ok: false, statusText: String(err), json: async () => ({}) }));
      let r = {};
      try { r = await resp.json(); } catch (err) { r = {}; }
      save.disabled = false;
      if (!resp.ok || r.error) { status.textContent = r.error || `Not saved: ${resp.status || ""} ${resp.statusText}`; status.classList.add("error"); return; }
      status.classList.remove("error");
      status.textContent = r.empty ? "Cleared." : "Saved: Check my work grades it.";
    };
  }
}

// What a check observed; what it expected only once the hint that names
// it was shown (the server withholds it before).
function checkDetail(c) {
  if (c.passed) return null;
  const d = h("div", { class: "muted check-detail" });
  if (c.error) d.append(problem("This check could not run.", c.error));
  else if (c.detail) d.append(c.detail);
  if (c.expected) d.append("; ", h("span", { class: "expected" }, c.expected));
  else if (c.expectedAfterHint) d.append(" ", h("span", { class: "withheld", "data-after-hint": String(c.expectedAfterHint) }, `(what it should be shows once you have seen hint ${c.expectedAfterHint})`));
  return d;
}

// addHint adds hint index (its HTML rendered and escaped by the server) to
// the list in order, and sets the hint button to the next one.
function addHint(index, html, why) {
  const list = $("#hints");
  if (!list || list.querySelector(`li[data-hint="${index}"]`)) return;
  const li = document.createElement("li");
  li.dataset.hint = String(index);
  li.value = index;
  li.innerHTML = html;
  if (why) li.append(h("div", { class: "muted" }, "(" + why + ")"));
  list.append(li);
  li.scrollIntoView({ block: "nearest" });
  const hint = $("#hint");
  if (!hint) return;
  const count = Number(hint.dataset.count), shown = Math.max(Number(hint.dataset.shown), index);
  hint.dataset.shown = String(shown);
  hint.textContent = shown >= count ? "No more hints" : `Show hint ${shown + 1} of ${count}`;
  hint.disabled = shown >= count;
}

// The strip counts down to the end of the learner's lab or exam.
function initTimeLeft() {
  const el = $("#time-left");
  if (!el) return;
  const end = Date.parse(el.dataset.deadline);
  const tick = () => {
    const left = Math.max(0, Math.round((end - Date.now()) / 1000));
    const m = Math.floor(left / 60), s = left % 60;
    el.textContent = left === 0 ? "time is up" : `${m}:${String(s).padStart(2, "0")} left`;
    el.classList.toggle("short", left < 300);
  };
  tick();
  setInterval(tick, 1000);
}

function init() {
  initActions();
  initTimeLeft();
  const root = document.getElementById("panels");
  if (!root) return;
  const raw = $("#rules-raw");
  if (raw) raw.onchange = () => { state.raw = raw.checked; renderRules(); };
  connect(root);
}

init();
