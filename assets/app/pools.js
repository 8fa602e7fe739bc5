// The pools panel of a process with serving-log findings: per leaking
// rank, the pool's used tokens over the log (the band between each
// bucket's least and most), the floor the verdict judged (at a fixed
// number of running requests) and the leak's onset, a red line. A healthy
// pool's floor stays flat however busy the log; a leak's climbs.
/* global uPlot, el, esc, later, drawn */
/* exported normalizePoolChart, poolsPanel */
"use strict";

function normalizePoolChart(raw) {
  const c = obj(raw);
  return {
    source: str(c.source), pool: str(c.pool, "pool"), engine: str(c.engine), rank: str(c.rank), unit: str(c.unit, "tokens"),
    capacity: num(c.capacity), x_unit: str(c.x_unit, "line"), start: str(c.start),
    x: arr(c.x).map((v) => num(v)), used_min: arr(c.used_min).map((v) => num(v)), used_max: arr(c.used_max).map((v) => num(v)),
    floor_x: arr(c.floor_x).map((v) => num(v)), floor: arr(c.floor).map((v) => num(v)),
    floor_running_requests: num(c.floor_running_requests), onset: numOrNull(c.onset), onset_label: str(c.onset_label),
  };
}

function poolsPanel(pr) {
  const box = el("div", "panel pools");
  box.appendChild(el("h3", "", "Pool slots in use, and the floor they return to"));
  for (const c of pr.pools) {
    const chartBox = el("div", "pool-chart");
    chartBox.dataset.rank = c.rank;
    const who = `${esc(c.engine)} ${esc(c.pool)}${c.rank ? " · " + esc(c.rank) : ""}`;
    const onset = c.onset === null ? "" : ` · <span class="pool-onset">leak onset ${esc(c.onset_label)}</span>`;
    box.appendChild(el("div", "state-head", `${who}: ${c.capacity.toLocaleString("en")} ${esc(c.unit)}${onset}`));
    box.appendChild(chartBox);
    later(() => drawPoolChart(chartBox, c));
  }
  box.appendChild(el("div", "legend", `<span class="sw" style="background:#1f77b4"></span>used (least and most in each interval) ` +
    `<span class="sw" style="background:#ff7f0e"></span>floor at the lowest load <span class="sw" style="background:#d62728"></span>onset`));
  return box;
}

// drawPoolChart draws one rank: the floor is a step line over the windows
// it was read in, set on the same x as the used band.
function drawPoolChart(box, c) {
  const scale = c.x_unit === "s" ? 3600 : 1;
  // One x axis for both: the band's buckets and the floors' windows.
  const xs = [...new Set([...c.x, ...c.floor_x])].sort((a, b) => a - b);
  const at = (src, vals) => { const m = new Map(src.map((x, i) => [x, vals[i]])); return xs.map((x) => (m.has(x) ? m.get(x) : null)); };
  const data = [xs.map((x) => x / scale), at(c.x, c.used_max), at(c.x, c.used_min), at(c.floor_x, c.floor)];
  const fmt = (u, v) => (v === null ? "" : Math.round(v).toLocaleString("en"));
  const onset = c.onset;
  new uPlot({
    width: Math.max(500, box.clientWidth || 1000), height: 220,
    scales: { x: { time: false } },
    axes: [{ label: c.x_unit === "s" ? `hours since ${c.start}` : "line" }, { values: (u, vals) => vals.map((v) => fmt(u, v)), size: 80, label: c.unit }],
    series: [
      { label: c.x_unit === "s" ? "h" : "line" },
      { label: "used (most)", stroke: "#1f77b4", width: 1, spanGaps: true, value: fmt },
      { label: "used (least)", stroke: "rgba(31,119,180,0.5)", width: 1, spanGaps: true, value: fmt },
      { label: "floor", stroke: "#ff7f0e", width: 2.5, spanGaps: true, paths: uPlot.paths.stepped({ align: 1 }), points: { show: true, size: 6 }, value: fmt },
    ],
    bands: [{ series: [1, 2], fill: "rgba(31,119,180,0.15)" }],
    hooks: {
      draw: [(u) => {
        if (onset === null) return;
        const x = Math.round(u.valToPos(onset / scale, "x", true));
        const ctx = u.ctx;
        ctx.save();
        ctx.strokeStyle = "#d62728";
        ctx.lineWidth = 2;
        ctx.setLineDash([6, 4]);
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
        ctx.restore();
        box.dataset.onsetDrawn = "1";
      }],
    },
  }, data, box);
  drawn.pools = (drawn.pools || 0) + 1;
  if (onset !== null) drawn.pool_onsets = (drawn.pool_onsets || 0) + 1;
}
