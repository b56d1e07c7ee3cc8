// A small live chart of probe outcomes: one row per source and target, one
// cell per round (green: answered, the shade telling which backend; red:
// refused; amber: timeout; grey: error), the last 60 rounds.
const COLORS = { refused: "#cf222e", timeout: "#bf8700", error: "#8c959f" };
const BACKEND = ["#1a7f37", "#2da44e", "#0969da", "#54aeff", "#8250df", "#116329"];

export class ProbeChart {
  constructor(canvas, legend) {
    this.canvas = canvas;
    this.legend = legend;
    this.rows = new Map(); // "source → target" → [{outcome, backend}]
    this.backends = new Map();
    this.max = 60;
  }
  color(r) {
    if (r.outcome !== "success") return COLORS[r.outcome] || COLORS.error;
    const b = r.backend || "?";
    if (!this.backends.has(b)) this.backends.set(b, BACKEND[this.backends.size % BACKEND.length]);
    return this.backends.get(b);
  }
  add(view) {
    for (const r of view.results || []) {
      const k = `${r.source} → ${r.target}`;
      if (!this.rows.has(k)) this.rows.set(k, []);
      const row = this.rows.get(k);
      row.push(r);
      if (row.length > this.max) row.shift();
    }
    this.draw();
  }
  draw() {
    const c = this.canvas, dpr = window.devicePixelRatio || 1;
    const labelW = 230, cell = 8, rowH = 16;
    const avail = (c.parentElement && c.parentElement.clientWidth) || 800;
    const fit = Math.max(10, Math.floor((avail - labelW - 20) / (cell + 1)));
    const w = labelW + fit * (cell + 1), hgt = Math.max(rowH, this.rows.size * rowH);
    c.width = w * dpr; c.height = hgt * dpr; c.style.width = w + "px"; c.style.height = hgt + "px";
    const g = c.getContext("2d");
    g.scale(dpr, dpr);
    g.font = "11px system-ui, sans-serif";
    g.textBaseline = "middle";
    let y = 0;
    for (const [k, row] of this.rows) {
      g.fillStyle = "#1b1f24";
      g.fillText(k.length > 38 ? k.slice(0, 37) + "…" : k, 0, y + rowH / 2);
      const shown = row.slice(-fit);
      shown.forEach((r, i) => {
        g.fillStyle = this.color(r);
        g.fillRect(labelW + i * (cell + 1), y + 3, cell, rowH - 6);
      });
      y += rowH;
    }
    const items = [...this.backends].map(([b, col]) => `<span style="color:${col}">■</span> ${escapeHTML(b)}`);
    items.push(`<span style="color:${COLORS.refused}">■</span> refused`, `<span style="color:${COLORS.timeout}">■</span> timeout`, `<span style="color:${COLORS.error}">■</span> error`);
    this.legend.innerHTML = items.join(" &nbsp; ");
  }
}

function escapeHTML(s) {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
