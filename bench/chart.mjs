// Draws the rows-remaining chart as a standalone SVG, by hand (no charting
// dependency): one panel per workload, one line per system, rows remaining
// (y) over seconds since the first request (x).

/** Panel size and margins, in SVG user units (px). */
const PANEL_W = 480;
const PANEL_H = 300;
const MARGIN = { left: 64, right: 16, top: 34, bottom: 42 };
const COLUMNS = 2;
const LEGEND_H = 56;
/** Ticks per axis (about). */
const TICKS = 5;
/** One colour and dash per system, in the order of bench/workloads.mjs. */
const STYLES = {
  direct: { color: "#444444", dash: "6 4" },
  queues: { color: "#d9480f", dash: "" },
  "relay-free": { color: "#1c7ed6", dash: "" },
  "relay-free-50": { color: "#2b8a3e", dash: "" },
  "relay-paid": { color: "#862e9c", dash: "" },
  "relay-free-plain": { color: "#1c7ed6", dash: "2 3" },
  "relay-paid-plain": { color: "#862e9c", dash: "2 3" },
};

const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** A "nice" step near range / TICKS. */
function niceStep(range) {
  if (range <= 0) return 1;
  const raw = range / TICKS;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const nice = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10;
  return nice * mag;
}

const fmtRows = (v) => (v >= 1000 ? `${+(v / 1000).toFixed(1)}k` : String(Math.round(v)));
/** Seconds with as many decimals as the tick step has. */
const fmtSecs = (v, step) => v.toFixed((String(+step.toPrecision(6)).split(".")[1] ?? "").length);

function panel(w, x0, y0) {
  const px = (t) => x0 + MARGIN.left + (t / w.xMax) * (PANEL_W - MARGIN.left - MARGIN.right);
  const py = (r) => y0 + MARGIN.top + (1 - r / w.rows) * (PANEL_H - MARGIN.top - MARGIN.bottom);
  const out = [];
  const bottom = y0 + PANEL_H - MARGIN.bottom;
  const left = x0 + MARGIN.left;
  const right = x0 + PANEL_W - MARGIN.right;
  out.push(`<text x="${left}" y="${y0 + 20}" class="title">${esc(`${w.id}: ${w.title}`)}</text>`);
  const xs = niceStep(w.xMax);
  for (let t = 0; t <= w.xMax + 1e-9; t += xs) {
    const x = px(t).toFixed(1);
    out.push(`<line x1="${x}" y1="${y0 + MARGIN.top}" x2="${x}" y2="${bottom}" class="grid"/>`);
    out.push(`<text x="${x}" y="${bottom + 16}" class="tick" text-anchor="middle">${fmtSecs(t, xs)}</text>`);
  }
  const ys = niceStep(w.rows);
  for (let r = 0; r <= w.rows + 1e-9; r += ys) {
    const y = py(r).toFixed(1);
    out.push(`<line x1="${left}" y1="${y}" x2="${right}" y2="${y}" class="grid"/>`);
    out.push(`<text x="${left - 6}" y="${(+y + 4).toFixed(1)}" class="tick" text-anchor="end">${fmtRows(r)}</text>`);
  }
  out.push(`<line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" class="axis"/>`);
  out.push(`<line x1="${left}" y1="${y0 + MARGIN.top}" x2="${left}" y2="${bottom}" class="axis"/>`);
  out.push(`<text x="${(left + right) / 2}" y="${bottom + 34}" class="label" text-anchor="middle">seconds since the first request</text>`);
  out.push(
    `<text transform="translate(${x0 + 16} ${(y0 + MARGIN.top + bottom) / 2}) rotate(-90)" class="label" text-anchor="middle">rows remaining</text>`,
  );
  for (const s of w.series) {
    const style = STYLES[s.system] ?? { color: "#000", dash: "" };
    // A step line: the count drops at each arrival and holds until the next.
    const pts = [];
    let prev = null;
    for (const [ms, rem] of s.curve) {
      const t = Math.min(ms / 1000, w.xMax);
      if (prev) pts.push(`${px(t).toFixed(1)},${py(prev).toFixed(1)}`);
      pts.push(`${px(t).toFixed(1)},${py(rem).toFixed(1)}`);
      prev = rem;
    }
    const dash = style.dash ? ` stroke-dasharray="${style.dash}"` : "";
    out.push(`<polyline points="${pts.join(" ")}" fill="none" stroke="${style.color}" stroke-width="1.8"${dash}/>`);
  }
  return out.join("\n");
}

/**
 * Renders the chart. `workloads`: [{ id, title, rows, series: [{ system,
 * label, curve: [[ms, rowsRemaining], ...] }] }].
 */
export function renderChart(workloads, { subtitle = "" } = {}) {
  const panels = workloads.map((w) => {
    const end = Math.max(0.001, ...w.series.map((s) => (s.curve.at(-1)?.[0] ?? 0) / 1000));
    return { ...w, xMax: end * 1.03 };
  });
  const rows = Math.ceil(panels.length / COLUMNS);
  const width = COLUMNS * PANEL_W;
  const height = LEGEND_H + rows * PANEL_H;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<style>.title{font-size:13px;font-weight:bold}.tick{font-size:11px;fill:#555}.label{font-size:11px;fill:#333}.grid{stroke:#e6e6e6;stroke-width:1}.axis{stroke:#888;stroke-width:1}.legend{font-size:12px}</style>`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="12" y="20" class="title">Rows remaining over time, local workerd${subtitle ? ` (${esc(subtitle)})` : ""}</text>`,
  ];
  const systems = [];
  for (const w of panels) for (const s of w.series) if (!systems.some((x) => x.system === s.system)) systems.push(s);
  systems.forEach((s, i) => {
    const style = STYLES[s.system] ?? { color: "#000", dash: "" };
    const x = 12 + (i % 3) * 300;
    const y = 36 + Math.floor(i / 3) * 16;
    const dash = style.dash ? ` stroke-dasharray="${style.dash}"` : "";
    parts.push(`<line x1="${x}" y1="${y - 4}" x2="${x + 24}" y2="${y - 4}" stroke="${style.color}" stroke-width="2.5"${dash}/>`);
    parts.push(`<text x="${x + 30}" y="${y}" class="legend">${esc(s.label)}</text>`);
  });
  panels.forEach((w, i) => {
    parts.push(panel(w, (i % COLUMNS) * PANEL_W, LEGEND_H + Math.floor(i / COLUMNS) * PANEL_H));
  });
  parts.push("</svg>");
  return parts.join("\n") + "\n";
}
