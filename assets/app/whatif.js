// The what-if chart: a device's reserved bytes as recorded and as
// vramscope's model of the caching allocator predicts them under the
// setting that the findings advise (the payload's devices[].whatif), with
// the memory cap and the OOMs marked. Loaded after model.js and before
// app.js, whose fmtBytes, esc, el and drawn it uses when it draws.
/* global uPlot, fmtBytes, esc, el, drawn, num, str, arr, obj */
/* exported normalizeWhatIf, drawWhatIf */
"use strict";

// normalizeWhatIf gives a device's whatif its types, or null; its
// columns are at most n buckets long (the device's timeline), and as long
// as each other.
function normalizeWhatIf(raw, n) {
  if (raw === null || raw === undefined) return null;
  const w = obj(raw);
  const hi = arr(w.reserved_max).slice(0, n).map((v) => num(v));
  const lo = hi.map((_, i) => num(arr(w.reserved_min)[i]));
  const o = w.oom ? obj(w.oom) : null;
  return {
    setting: str(w.setting, "another setting"), advice: str(w.advice),
    baseline_max_reserved_bytes: num(w.baseline_max_reserved_bytes), predicted_max_reserved_bytes: num(w.predicted_max_reserved_bytes),
    limit_bytes: num(w.limit_bytes), reserved_min: lo, reserved_max: hi,
    oom: o ? { event: num(o.event), x: num(o.x), label: str(o.label) } : null,
  };
}

const whatIfColors = { recorded: "#9467bd", predicted: "#17becf", cap: "#d62728", oom: "#d62728" };

// drawWhatIf draws dv.whatif into box, on the x axis of dv's timeline.
function drawWhatIf(box, dv) {
  const s = dv.series, w = dv.whatif;
  const scale = s.x_unit === "us" ? 1e6 : 1;
  // The prediction stops at its OOM: no line past it.
  const pad = (c) => s.x.map((_, i) => (i < c.length ? c[i] : null));
  const value = (u, v) => (v === null ? "" : fmtBytes(v));
  const predicted = "reserved with " + w.setting;
  box.appendChild(el("h3", "", "What if: " + esc(w.setting)));
  if (w.advice) box.appendChild(el("p", "sub", esc("Replayed through vramscope's model of the caching allocator, " + w.advice + ".")));
  const chart = el("div");
  box.appendChild(chart);
  const recordedOOMs = dv.markers.filter((m) => m.kind === "oom");
  const vline = (u, x, dash) => {
    const ctx = u.ctx, px = Math.round(u.valToPos(x / scale, "x", true));
    ctx.setLineDash(dash);
    ctx.beginPath();
    ctx.moveTo(px, u.bbox.top);
    ctx.lineTo(px, u.bbox.top + u.bbox.height);
    ctx.stroke();
  };
  new uPlot({
    width: Math.max(500, box.clientWidth || 1000), height: 220,
    scales: { x: { time: false }, y: { range: (u, lo, hi) => [0, Math.max(hi, w.limit_bytes) * 1.05 || 1] } },
    axes: [{ label: s.x_unit === "us" ? "seconds since the first event" : "event" }, { values: (u, vals) => vals.map(fmtBytes), size: 90 }],
    series: [
      { label: s.x_unit === "us" ? "s" : "event" },
      { label: "reserved, recorded", stroke: whatIfColors.recorded, width: 1.5, value },
      { label: "reserved, recorded (min)", stroke: "rgba(148,103,189,0.4)", value },
      { label: predicted, stroke: whatIfColors.predicted, width: 2, value },
      { label: predicted + " (min)", stroke: "rgba(23,190,207,0.4)", value },
    ],
    bands: [{ series: [1, 2], fill: "rgba(148,103,189,0.10)" }, { series: [3, 4], fill: "rgba(23,190,207,0.15)" }],
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        ctx.strokeStyle = whatIfColors.cap;
        ctx.lineWidth = 1.5;
        if (w.limit_bytes > 0) {
          const py = Math.round(u.valToPos(w.limit_bytes, "y", true));
          ctx.setLineDash([6, 4]);
          ctx.beginPath();
          ctx.moveTo(u.bbox.left, py);
          ctx.lineTo(u.bbox.left + u.bbox.width, py);
          ctx.stroke();
        }
        ctx.strokeStyle = whatIfColors.oom;
        ctx.lineWidth = 2;
        for (const m of recordedOOMs) vline(u, m.x, []);
        if (w.oom) vline(u, w.oom.x, [3, 3]);
        ctx.restore();
      }],
    },
  }, [s.x.map((x) => x / scale), s.reserved_max, s.reserved_min, pad(w.reserved_max), pad(w.reserved_min)], chart);
  const sw = (color, text) => `<span class="sw" style="background:${color}"></span>${esc(text)} `;
  let legend = sw(whatIfColors.recorded, `recorded settings, replayed: peak ${fmtBytes(w.baseline_max_reserved_bytes)}`) +
    sw(whatIfColors.predicted, `with ${w.setting}: peak ${fmtBytes(w.predicted_max_reserved_bytes)}`);
  if (w.limit_bytes > 0) legend += sw(whatIfColors.cap, `cap ${fmtBytes(w.limit_bytes)} (dashed)`);
  if (recordedOOMs.length) legend += sw(whatIfColors.oom, "recorded OOM");
  if (w.oom) legend += sw(whatIfColors.oom, `predicted OOM at event ${w.oom.event} (dotted)`);
  box.appendChild(el("div", "legend whatif-legend", legend));
  if (w.oom) box.appendChild(el("ul", "markers", `<li>${esc(w.oom.label)}</li>`));
  drawn.whatif = (drawn.whatif || 0) + 1;
}
