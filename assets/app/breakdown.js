// What the memory is made of: a device's allocated bytes stacked by
// category (torch's memory-timeline colours, the same on every page) and
// by module, over its trace. The Go side (report/composition.go) labels
// the blocks and samples the points; this draws them.
/* global uPlot, el, esc, fmtBytes, siteColor, tabs, drawn */
"use strict";

// normalizeComposition keeps a device's composition drawable whatever the
// payload lacks: equal-length columns, finite numbers; null without one.
function normalizeComposition(raw) {
  if (!raw || typeof raw !== "object") return null;
  const fin = (v) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  const x = Array.isArray(raw.x) ? raw.x.map(fin) : [];
  const band = (b) => ({
    name: typeof b.name === "string" ? b.name : "?",
    colour: typeof b.colour === "string" ? b.colour : "",
    bytes: x.map((_, i) => fin(Array.isArray(b.bytes) ? b.bytes[i] : 0)),
  });
  const bands = (v) => (Array.isArray(v) ? v.filter((b) => b && typeof b === "object").map(band) : []);
  if (!x.length) return null;
  return { x, event: x.map((_, i) => fin(Array.isArray(raw.event) ? raw.event[i] : 0)), by_category: bands(raw.by_category), by_module: bands(raw.by_module) };
}

// compositionView is the section's tabs and chart box.
function compositionView(comp, xUnit) {
  const box = el("div", "composition");
  const views = [
    { label: "by category", bands: comp.by_category },
    { label: "by module", bands: comp.by_module.map((b) => ({ ...b, colour: b.colour || siteColor(b.name) })) },
  ].filter((v) => v.bands.length);
  const wrap = el("div");
  wrap.append(tabs(views, (v) => v.label, (v) => drawComposition(box, comp, v.bands, xUnit)), box);
  return wrap;
}

// drawComposition stacks bands: each series is the running total up to
// its band, drawn from the top down, each filled to the axis, so that the
// band below covers all but its own share. Legend values are the band's
// own bytes.
function drawComposition(box, comp, bands, xUnit) {
  box.innerHTML = "";
  const scale = xUnit === "us" ? 1e6 : 1;
  const xs = comp.x.map((x) => x / scale);
  const tops = [];
  let run = xs.map(() => 0);
  for (const b of bands) {
    run = run.map((v, i) => v + b.bytes[i]);
    tops.push(run);
  }
  const order = bands.map((_, k) => k).reverse();
  const series = [{ label: xUnit === "us" ? "s" : "event" }];
  for (const k of order) {
    const b = bands[k];
    series.push({
      label: b.name, stroke: b.colour, fill: b.colour, width: 0.5,
      value: (u, v, si, idx) => (idx === null || idx === undefined ? "" : fmtBytes(b.bytes[idx])),
    });
  }
  const opts = {
    width: Math.max(500, box.clientWidth || 1000), height: 260,
    scales: { x: { time: false } },
    axes: [{ label: xUnit === "us" ? "seconds since the first event" : "event" }, { values: (u, vals) => vals.map(fmtBytes), size: 90 }],
    series,
  };
  new uPlot(opts, [xs, ...order.map((k) => tops[k])], box);
  box.dataset.bands = bands.map((b) => b.name).join(",");
  drawn.composition = (drawn.composition || 0) + 1;
}
