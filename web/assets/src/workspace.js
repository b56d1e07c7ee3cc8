// The scenario workspace's layout: two splitters (pointer and keyboard)
// whose positions the browser remembers, the live views' tabs, and the
// narrow layout, in which the task pane becomes the views' first tab so
// that the terminal keeps the whole width (and at least 80 columns).
const KEY = "svclab.workspace";
const narrow = window.matchMedia("(max-width: 1099px)");
const $ = (sel) => document.querySelector(sel);

// The terminal needs about 700px for 80 columns of its 13px font.
const MIN_TASK = 240, MIN_TERM_W = 700, MIN_TERM_H = 120, MIN_VIEWS_H = 110;

function load() {
  try { return JSON.parse(localStorage.getItem(KEY)) || {}; } catch (e) { return {}; }
}
function save(st) {
  try { localStorage.setItem(KEY, JSON.stringify(st)); } catch (e) { /* private mode */ }
}

function init() {
  const ws = $("#workspace");
  if (!ws) return;
  const grid = $("#ws-grid"), right = $("#ws-right"), task = $("#pane-task");
  const splitV = $("#split-task"), splitH = $("#split-term");
  const body = $("#views-body"), tabs = [...document.querySelectorAll("#views-tabs [role=tab]")];
  const st = load();

  // Sizes: the task pane's width in px, the terminal's share of the
  // right column's height.
  const taskBounds = () => [MIN_TASK, Math.max(MIN_TASK, grid.clientWidth - MIN_TERM_W - splitV.offsetWidth)];
  const termBounds = () => {
    const h = right.clientHeight || 1;
    return [Math.min(0.9, MIN_TERM_H / h), Math.max(0.1, 1 - (MIN_VIEWS_H + splitH.offsetHeight) / h)];
  };
  const clamp = (v, [lo, hi]) => Math.min(hi, Math.max(lo, v));
  function apply() {
    if (!narrow.matches) {
      const w = clamp(st.taskW || Math.min(384, grid.clientWidth * 0.3), taskBounds());
      grid.style.setProperty("--task-w", w + "px");
      splitV.setAttribute("aria-valuenow", String(Math.round(100 * w / grid.clientWidth)));
    }
    const f = clamp(st.termH || 0.55, termBounds());
    right.style.setProperty("--term-h", (100 * f).toFixed(2) + "%");
    splitH.setAttribute("aria-valuenow", String(Math.round(100 * f)));
  }
  for (const s of [splitV, splitH]) { s.setAttribute("aria-valuemin", "0"); s.setAttribute("aria-valuemax", "100"); }

  function drag(splitter, move) {
    splitter.addEventListener("pointerdown", (ev) => {
      ev.preventDefault();
      splitter.setPointerCapture(ev.pointerId);
      splitter.classList.add("dragging");
      const onMove = (e) => { move(e); apply(); };
      const onUp = () => {
        splitter.classList.remove("dragging");
        splitter.removeEventListener("pointermove", onMove);
        splitter.removeEventListener("pointerup", onUp);
        splitter.removeEventListener("pointercancel", onUp);
        save(st);
      };
      splitter.addEventListener("pointermove", onMove);
      splitter.addEventListener("pointerup", onUp);
      splitter.addEventListener("pointercancel", onUp);
    });
  }
  drag(splitV, (e) => { st.taskW = clamp(e.clientX - grid.getBoundingClientRect().left, taskBounds()); });
  drag(splitH, (e) => {
    const r = right.getBoundingClientRect();
    st.termH = clamp((e.clientY - r.top) / r.height, termBounds());
  });
  // Arrow keys move a focused splitter (Shift: further); Home and End go
  // to the ends.
  function keys(splitter, less, more, step) {
    splitter.addEventListener("keydown", (e) => {
      const big = e.shiftKey ? 4 : 1;
      if (e.key === less) step(-big);
      else if (e.key === more) step(big);
      else if (e.key === "Home") step(-1e6);
      else if (e.key === "End") step(1e6);
      else return;
      e.preventDefault();
      apply();
      save(st);
    });
  }
  keys(splitV, "ArrowLeft", "ArrowRight", (n) => {
    st.taskW = clamp((st.taskW || task.getBoundingClientRect().width) + n * 32, taskBounds());
  });
  keys(splitH, "ArrowUp", "ArrowDown", (n) => {
    st.termH = clamp((st.termH || 0.55) + n * 0.04, termBounds());
  });

  // The views' tabs.
  function select(tab, remember) {
    const target = tab.getAttribute("aria-controls");
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
    }
    const all = tab.id === "tab-all";
    body.classList.toggle("all", all);
    for (const p of body.children) p.classList.toggle("active", all ? p !== task : p.id === target);
    if (remember) { st.tab = tab.id; save(st); }
  }
  tabs.forEach((t, i) => {
    t.addEventListener("click", () => select(t, true));
    t.addEventListener("keydown", (e) => {
      const visible = tabs.filter((x) => x.offsetParent !== null);
      const at = visible.indexOf(t);
      let next = null;
      if (e.key === "ArrowRight") next = visible[(at + 1) % visible.length];
      else if (e.key === "ArrowLeft") next = visible[(at - 1 + visible.length) % visible.length];
      else if (e.key === "Home") next = visible[0];
      else if (e.key === "End") next = visible[visible.length - 1];
      if (!next) return;
      e.preventDefault();
      next.focus();
      select(next, true);
    });
  });
  const byId = (id) => tabs.find((t) => t.id === id);

  // Narrow: the task pane is the views' first tab; wide: a pane again.
  function layout() {
    const taskTab = byId("tab-task");
    if (narrow.matches) {
      if (task.parentElement !== body) body.prepend(task);
      ws.classList.add("narrow");
      select(byId(st.tab) || taskTab, false);
    } else {
      if (task.parentElement !== grid) grid.prepend(task);
      ws.classList.remove("narrow");
      task.classList.remove("active");
      const cur = byId(st.tab);
      select(cur && cur !== taskTab ? cur : byId("tab-slices"), false);
    }
    apply();
  }
  narrow.addEventListener("change", layout);
  window.addEventListener("resize", apply);
  layout();
  window.svclabWorkspace = { state: st, select: (id) => select(byId(id), true) };
}

init();
