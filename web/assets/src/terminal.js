// The browser terminal: xterm.js over a websocket to a shell on a lab node.
// Binary frames carry the terminal's bytes both ways; text frames carry
// control messages ({"type":"resize","rows":R,"cols":C}).
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { WebLinksAddon } from "@xterm/addon-web-links";
import { ClipboardAddon } from "@xterm/addon-clipboard";
import "@xterm/xterm/css/xterm.css";

const isMac = /Mac|iPhone|iPad/.test(navigator.platform);

function openTab(container, url, status, readOnly) {
  const term = new Terminal({ cursorBlink: !readOnly, disableStdin: readOnly, fontSize: 13, scrollback: 5000, convertEol: false,
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.loadAddon(new WebLinksAddon());
  // OSC 52 lets a program write the viewer's clipboard: a learner's own
  // terminal may, a read-only view (the instructor watching a learner)
  // must not, or a learner's printf would rewrite the instructor's
  // clipboard.
  if (!readOnly) term.loadAddon(new ClipboardAddon());
  term.open(container);
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const enc = new TextEncoder();
  const send = (s) => { if (ws.readyState === WebSocket.OPEN) ws.send(enc.encode(s)); };
  // A read-only view (the instructor watching a learner) is told the
  // learner's size and keeps it: the learner's shell draws for their
  // terminal (line editing, wrapping), not for this one.
  let mirrored = false;
  const resize = () => {
    if (mirrored) return;
    try { fit.fit(); } catch (e) { return; }
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", rows: term.rows, cols: term.cols }));
  };
  // Copy and paste on every OS: Ctrl+Shift+C / Ctrl+Shift+V (Linux,
  // Windows), Cmd+C / Cmd+V (macOS), Ctrl+C copies when text is selected,
  // and the context menu pastes.
  term.attachCustomKeyEventHandler((ev) => {
    if (ev.type !== "keydown") return true;
    const mod = isMac ? ev.metaKey : ev.ctrlKey;
    const key = ev.key.toLowerCase();
    if (mod && key === "c" && (ev.shiftKey || isMac || term.hasSelection())) {
      if (term.hasSelection()) navigator.clipboard?.writeText(term.getSelection());
      ev.preventDefault();
      return false;
    }
    if (mod && key === "v" && (ev.shiftKey || isMac)) {
      // The browser's paste event delivers the text (term.onData).
      return false;
    }
    return true;
  });
  container.addEventListener("contextmenu", async (ev) => {
    if (!navigator.clipboard?.readText) return;
    ev.preventDefault();
    try { term.paste(await navigator.clipboard.readText()); } catch (e) { /* permission denied */ }
  });
  if (!readOnly) {
    term.onData(send);
    term.onBinary(send);
  }
  ws.onopen = () => { status.textContent = ""; resize(); term.focus(); };
  ws.onmessage = (ev) => {
    if (typeof ev.data === "string") {
      const size = readOnly && ev.data.startsWith("{") ? learnerSize(ev.data) : null;
      if (size) {
        mirrored = true;
        term.resize(size.cols, size.rows);
      } else if (!ev.data.startsWith("{")) {
        status.textContent = ev.data;
      }
      return;
    }
    term.write(new Uint8Array(ev.data));
  };
  ws.onclose = (ev) => { status.textContent = "The shell has ended" + (ev.reason ? ": " + ev.reason : "") + ". Reopen the tab to start another."; };
  new ResizeObserver(() => resize()).observe(container);
  return { term, ws, fit, resize };
}

// learnerSize reads a {"type":"size","rows":R,"cols":C} control message.
function learnerSize(data) {
  try {
    const m = JSON.parse(data);
    if (m.type === "size" && m.rows > 0 && m.cols > 0 && m.rows <= 1000 && m.cols <= 1000) return { rows: m.rows, cols: m.cols };
  } catch (e) { /* not a control message */ }
  return null;
}

function init() {
  const root = document.getElementById("terminal");
  if (!root) return;
  const tabs = root.querySelectorAll("[data-node]");
  const panes = root.querySelector(".term-panes");
  const status = root.querySelector(".term-status");
  const open = {};
  const proto = location.protocol === "https:" ? "wss://" : "ws://";
  function show(btn) {
    const node = btn.dataset.node;
    tabs.forEach((t) => t.classList.toggle("active", t === btn));
    for (const n in open) open[n].el.hidden = n !== node;
    if (!open[node] || open[node].t.ws.readyState > 1) {
      if (open[node]) open[node].el.remove();
      const el = document.createElement("div");
      el.className = root.dataset.readonly === "true" ? "term-pane mirror" : "term-pane";
      el.dataset.node = node;
      panes.appendChild(el);
      open[node] = { el, t: openTab(el, proto + location.host + root.dataset.ws + "?node=" + encodeURIComponent(node), status, root.dataset.readonly === "true") };
      window.svclabTerminals = window.svclabTerminals || {};
      window.svclabTerminals[node] = open[node].t;
    } else {
      open[node].t.resize();
      open[node].t.term.focus();
    }
  }
  tabs.forEach((b) => b.addEventListener("click", () => show(b)));
  if (tabs.length) show(tabs[0]);
}

init();
