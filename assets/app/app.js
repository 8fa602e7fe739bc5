// vramscope's report page. The same script runs in the single-file report
// (the payload is embedded as window.VRAMSCOPE_PAYLOAD) and in
// `vramscope serve` (payload null: it waits for the server to load the
// inputs, then fetches the payload and asks for states, flame graphs and
// diffs on demand). It only draws what the Go side computed, normalized
// by model.js; each process draws on its own, so that one that fails
// leaves the others on the page.
/* global uPlot, d3, flamegraph, drawAllocState, drawWhatIf, compositionView, normalizePayload, normalizeState, normalizeFlame, normalizeDiff, renderDiff, fmtBytes, esc, el, siteColor, poolsPanel */
"use strict";

const drawn = { timeline: 0, state: 0, flame: 0, sites: 0 };

// later runs fn once the boxes just built are laid out (charts size
// themselves to their box); main waits for every such draw, nested ones
// included, before it marks the page drawn. A draw that throws marks the
// process section it belongs to (scope, the section being built or drawn
// when later was called) as failed, and the others go on.
const pending = [];
let scope = null;
function later(fn) {
  const sec = scope;
  pending.push(new Promise((resolve) => setTimeout(() => {
    const outer = scope;
    scope = sec;
    try { fn(); } catch (e) { failed(sec, e); } finally { scope = outer; resolve(); }
  }, 0)));
}

// failed records an error of a process section's drawing: in the console
// (and so on <body data-errors>) and on the section, which says it.
function failed(sec, e) {
  console.error(e);
  if (!sec) return;
  sec.dataset.failed = "1";
  sec.appendChild(el("p", "error", "Part of this process could not be drawn: " + esc(e && e.message ? e.message : e)));
}

async function fetchJSON(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status} ${await r.text()}`);
  return r.json();
}

// api is null in the static report: it holds only precomputed moments.
const api = window.VRAMSCOPE_PAYLOAD === null ? {
  state: async (snap, dev, i) => normalizeState(await fetchJSON(`api/state?snapshot=${snap}&device=${dev}&event=${i}`)),
  flame: async (snap, dev, i) => normalizeFlame(await fetchJSON(`api/flame?snapshot=${snap}&device=${dev}&event=${i}`)),
  diff: async (a, b, at, lines) => normalizeDiff(await fetchJSON(`api/diff?base=${a}&other=${b}&at=${encodeURIComponent(at)}${lines ? "&lines=1" : ""}`)),
} : null;

// waitForServer polls the load's progress until the payload is ready.
async function waitForServer(status) {
  for (;;) {
    const s = await fetchJSON("api/status");
    status.textContent = s.state === "loading"
      ? `Loading ${s.done} of ${s.total} inputs${s.current ? ": " + s.current : ""}…`
      : s.state === "failed" ? "Loading failed: " + s.error : "Loaded.";
    if (s.state === "ready") return fetchJSON("api/report");
    if (s.state === "failed") throw new Error(s.error);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function main() {
  const app = document.getElementById("app");
  const status = document.getElementById("status");
  const p = normalizePayload(window.VRAMSCOPE_PAYLOAD || await waitForServer(status));
  status.textContent = "";
  app.appendChild(el("h1", "verdict v-" + esc(p.verdict), `Verdict: ${esc(p.verdict)}`));
  app.appendChild(el("p", "sub", `${p.processes.length} process${p.processes.length === 1 ? "" : "es"}` +
    (api ? " · click the timeline to see the allocator and live memory at that moment" : "")));
  const sections = p.processes.map((pr) => {
    const sec = el("section", "process");
    sec.dataset.process = pr.id;
    app.appendChild(sec);
    scope = sec;
    try { processSection(sec, pr); } catch (e) { failed(sec, e); }
    scope = null;
    return sec;
  });
  if (api) app.appendChild(diffSection(p));
  while (pending.length) await pending.shift();
  // Which processes drew completely, for the browser test.
  for (const sec of sections) sec.dataset.drawn = sec.dataset.failed ? "0" : "1";
  document.body.dataset.processes = String(sections.length);
  document.body.dataset.processesDrawn = String(sections.filter((sec) => !sec.dataset.failed).length);
  document.body.dataset.charts = JSON.stringify(drawn);
  // Milliseconds from navigation to drawn, for the benchmark.
  document.body.dataset.drawnMs = Math.round(performance.now());
  document.body.dataset.drawn = "1";
}

function processSection(sec, pr) {
  sec.appendChild(el("h2", "", `${esc(pr.id)} <span class="badge v-${esc(pr.verdict)}">${esc(pr.verdict)}</span>`));
  const s = pr.stats;
  const peaks = (a, r) => a === null || r === null ? "" : `; trace peaks: allocated ${fmtBytes(a)}, reserved ${fmtBytes(r)}`;
  let line = `allocated ${fmtBytes(s.allocated_bytes)}, reserved ${fmtBytes(s.reserved_bytes)} at the last input`;
  // Peaks of several devices fall at different times: each device's own.
  if (s.devices.length > 1) line += ` on ${s.devices.length} devices`;
  else line += peaks(s.peak_allocated_bytes, s.peak_reserved_bytes);
  sec.appendChild(el("p", "sub", line));
  if (s.devices.length > 1) {
    sec.appendChild(el("ul", "devices", s.devices.map((d) =>
      `<li>cuda:${d.device}: allocated ${fmtBytes(d.allocated_bytes)}, reserved ${fmtBytes(d.reserved_bytes)}${peaks(d.peak_allocated_bytes, d.peak_reserved_bytes)}</li>`).join("")));
  }
  sec.appendChild(findingsList(pr));
  if (pr.notes.length) sec.appendChild(el("ul", "notes", pr.notes.map((n) => `<li>${esc(n)}</li>`).join("")));
  if (pr.snapshots.length) sec.appendChild(snapshotPanel(pr));
  if (pr.totals.length > 1) sec.appendChild(sitesPanel(pr));
  if (pr.pools.length) sec.appendChild(poolsPanel(pr)); // pools.js
}

function findingsList(pr) {
  if (!pr.findings.length) return el("p", "", "No findings.");
  const ol = el("ol", "findings");
  for (const f of pr.findings) {
    const li = el("li", "finding sev-" + esc(f.severity));
    const where = pr.multiDevice ? ` · cuda:${f.device}` : "";
    let html = `<span class="badge">${esc(f.severity)} ${esc(f.kind)}${where}</span> <b>${esc(f.title)}</b>`;
    // Two places, as analyze's text: where the library allocated, then
    // the user's line that called it.
    const place = (fr) => fr.line ? `${esc(fr.function)} (${esc(fr.file)}:${fr.line})` : `${esc(fr.function)} (${esc(fr.file)})`;
    if (f.origin) html += `<p class="sub">allocated in ${place(f.origin)}${f.allocated_via.length ? " via " + f.allocated_via.map(place).join(" &lt; ") : ""}</p>`;
    if (f.stack.length) html += "<pre>" + f.stack.map(place).join("\n") + "</pre>";
    else if (f.evidence.callsite_reason) html += `<p class="sub">${esc(f.evidence.callsite_reason)}</p>`;
    if (f.fix) html += `<p class="fix">${esc(f.fix)}</p>`;
    const keys = Object.keys(f.evidence).sort();
    if (keys.length) html += `<details><summary>evidence</summary><pre>${keys.map((k) => `${esc(k)}: ${esc(evidenceText(k, f.evidence[k]))}`).join("\n")}</pre></details>`;
    li.innerHTML = html;
    ol.appendChild(li);
  }
  return ol;
}

// evidenceText formats an evidence value as analyze's text does: numbers
// under a key that names bytes as sizes, fractions with three digits,
// lists joined, objects as {key value; ...}.
function evidenceText(key, v) {
  if (typeof v === "number") return key.includes("bytes") ? fmtBytes(v) : Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(3)));
  if (Array.isArray(v)) return v.map((x) => evidenceText(key, x)).join(", ");
  if (v !== null && typeof v === "object") {
    return "{" + Object.keys(v).sort().filter((k) => k !== "title").map((k) => `${k} ${evidenceText(k, v[k])}`).join("; ") + "}";
  }
  return String(v);
}

// snapshotPanel shows one snapshot and device at a time: the timeline,
// the allocator state and the flame graph. It opens on the focus (the
// snapshot and device the verdict comes from), else on the last
// snapshot, whose trace reaches furthest.
function snapshotPanel(pr) {
  const panel = el("div", "panel");
  const pick = el("div", "picker");
  const body = el("div");
  panel.append(pick, body);
  const choices = [];
  pr.snapshots.forEach((sv) => sv.devices.forEach((dv) => choices.push({ sv, dv })));
  if (!choices.length) {
    body.appendChild(el("p", "sub", "No device to show: the snapshot" + (pr.snapshots.length > 1 ? "s hold" : " holds") +
      " no segments and no trace events."));
    return panel;
  }
  const select = el("select");
  choices.forEach((c, k) => {
    const o = el("option", "", esc(`${c.sv.input}${c.sv.step !== null ? " (step " + c.sv.step + ")" : ""} · cuda:${c.dv.device} · ${c.dv.events} events`));
    o.value = k;
    select.appendChild(o);
  });
  const at = linkedMoment();
  const linked = at ? choices.findIndex((c) => c.sv.id === at.snapshot && c.dv.device === at.device) : -1;
  const f = pr.focus;
  const focused = f ? choices.findIndex((c) => c.sv.id === f.snapshot && c.dv.device === f.device) : -1;
  select.value = linked >= 0 ? linked : focused >= 0 ? focused : choices.length - 1;
  if (choices.length > 1) pick.append(el("label", "", "Snapshot "), select);
  const show = () => {
    body.innerHTML = "";
    const k = +select.value;
    const c = choices[k];
    panel.dataset.shown = `${c.sv.id}:${c.dv.device}`;
    // The focus's state (the OOM's, the peak's) first, where it is.
    deviceView(body, pr, c.sv, c.dv, k === focused ? f.state : "");
  };
  select.addEventListener("change", show);
  later(show);
  return panel;
}

function deviceView(body, pr, sv, dv, firstState) {
  const tl = el("div", "timeline");
  const stateBox = el("div", "state");
  const flameBox = el("div", "flame");
  const whatIfBox = el("div", "whatif");
  body.append(el("h3", "", "Memory over time"), tl, whatIfBox);
  if (dv.composition) body.append(el("h3", "", "What the memory is made of"), compositionView(dv.composition, dv.series.x_unit));
  if (dv.caveats.length) body.appendChild(el("ul", "notes", dv.caveats.map((c) => `<li>${esc(c)}</li>`).join("")));
  const first = Math.max(0, dv.states.findIndex((st) => st.label === firstState));
  const stateTabs = tabs(dv.states, (st) => st.label, (st) => { drawn.state += drawAllocState(stateBox, st) ? 1 : 0; }, first);
  body.append(el("h3", "", "Allocator state"), stateTabs, stateBox);
  const flames = dv.flames.slice();
  if (pr.leaked && sv === pr.snapshots[pr.snapshots.length - 1]) flames.push(pr.leaked);
  const flameTabs = tabs(flames, (f) => f.label, (f) => drawFlame(flameBox, f));
  body.append(el("h3", "", "Live memory by stack"), flameTabs, flameBox);
  if (dv.events > 0 && dv.series.x.length > 0) {
    const pick = async (event) => {
      if (!api) return;
      const [st, fl] = await Promise.all([api.state(sv.id, dv.device, event), api.flame(sv.id, dv.device, event)]);
      for (const b of [...stateTabs.children, ...flameTabs.children]) b.classList.remove("on");
      drawAllocState(stateBox, st);
      drawFlame(flameBox, fl);
    };
    drawTimeline(tl, dv, pick);
    if (dv.whatif) drawWhatIf(whatIfBox, dv);
    // ?at=SNAPSHOT:DEVICE:EVENT opens the served UI at that moment, so a
    // link can point a colleague at it.
    const at = linkedMoment();
    if (api && at && at.snapshot === sv.id && at.device === dv.device) {
      later(() => pending.push(pick(at.event)));
    }
  } else {
    tl.appendChild(el("p", "sub", "No trace in this snapshot (recording was off): only the state at the dump is known."));
  }
}

// linkedMoment parses ?at=SNAPSHOT:DEVICE:EVENT, or returns null.
function linkedMoment() {
  const at = (new URLSearchParams(location.search).get("at") || "").split(":").map(Number);
  return at.length === 3 && at.every(Number.isInteger) ? { snapshot: at[0], device: at[1], event: at[2] } : null;
}

// tabs renders one button per item and shows item first (0 by default).
function tabs(items, label, show, first = 0) {
  const bar = el("div", "tabs");
  items.forEach((it, k) => {
    const b = el("button", "", esc(label(it)));
    b.addEventListener("click", () => {
      bar.querySelectorAll("button").forEach((x) => x.classList.remove("on"));
      b.classList.add("on");
      show(it);
    });
    bar.appendChild(b);
    if (k === first) { b.classList.add("on"); later(() => show(it)); }
  });
  return bar;
}

const markerColors = { step: "rgba(120,120,120,0.35)", snapshot: "#1f77b4", oom: "#d62728", peak: "#ff7f0e" };

function drawTimeline(box, dv, onPick) {
  const s = dv.series;
  const scale = s.x_unit === "us" ? 1e6 : 1;
  const xs = s.x.map((x) => x / scale);
  const data = [xs, s.allocated_max, s.allocated_min, s.reserved_max, s.reserved_min];
  const width = Math.max(500, box.clientWidth || 1000);
  const bytesAxis = { values: (u, vals) => vals.map(fmtBytes), size: 90 };
  const opts = {
    width, height: 260,
    scales: { x: { time: false } },
    axes: [{ label: s.x_unit === "us" ? "seconds since the first event" : "event" }, bytesAxis],
    series: [
      { label: s.x_unit === "us" ? "s" : "event" },
      { label: "allocated", stroke: "#2ca02c", width: 1.5, value: (u, v) => v === null ? "" : fmtBytes(v) },
      { label: "allocated (min)", stroke: "rgba(44,160,44,0.4)", value: (u, v) => v === null ? "" : fmtBytes(v) },
      { label: "reserved", stroke: "#9467bd", width: 1.5, value: (u, v) => v === null ? "" : fmtBytes(v) },
      { label: "reserved (min)", stroke: "rgba(148,103,189,0.4)", value: (u, v) => v === null ? "" : fmtBytes(v) },
    ],
    bands: [{ series: [1, 2], fill: "rgba(44,160,44,0.15)" }, { series: [3, 4], fill: "rgba(148,103,189,0.12)" }],
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        for (const m of dv.markers) {
          const x = Math.round(u.valToPos(m.x / scale, "x", true));
          ctx.strokeStyle = markerColors[m.kind] || "#888";
          ctx.lineWidth = m.kind === "step" ? 1 : 2;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
        }
        ctx.restore();
      }],
    },
  };
  const plot = new uPlot(opts, data, box);
  const kinds = [...new Set(dv.markers.map((m) => m.kind))];
  box.appendChild(el("div", "legend", kinds.map((k) => `<span class="sw" style="background:${markerColors[k] || "#888"}"></span>${esc(k)} `).join("") +
    (api ? " · click to inspect that moment" : "")));
  const events = dv.markers.filter((m) => m.kind !== "step");
  if (events.length) box.appendChild(el("ul", "markers", events.slice(0, 20).map((m) => `<li>${esc(m.kind)} at event ${m.event}: ${esc(m.label)}</li>`).join("")));
  plot.over.addEventListener("click", () => {
    const k = plot.cursor.idx;
    if (k !== null && k !== undefined) onPick(s.first[k]);
  });
  drawn.timeline++;
  return plot;
}

function drawFlame(box, f) {
  box.innerHTML = "";
  box.appendChild(el("div", "state-head", `${esc(f.label)}: ${fmtBytes(f.root.value)}`));
  if (!f.root.value) { box.appendChild(el("p", "sub", "Nothing live.")); return; }
  const holder = el("div");
  box.appendChild(holder);
  const tip = flamegraph.tooltip.defaultFlamegraphTooltip().text((d) => `${d.data.name}: ${fmtBytes(d.data.value)}`);
  const chart = flamegraph.default()
    .width(Math.max(500, box.clientWidth || 1000))
    .cellHeight(18)
    .transitionDuration(0)
    .minFrameSize(2)
    .inverted(true)
    .tooltip(tip)
    .setColorMapper((d) => d.data.name === "all" ? "#bbb" : siteColor(d.data.name))
    .label((d) => `${d.data.name}: ${fmtBytes(d.data.value)}`);
  d3.select(holder).datum(f.root).call(chart);
  drawn.flame++;
}

// sitesPanel charts the bytes each callsite holds at each snapshot's end:
// a leak is a line that only goes up.
function sitesPanel(pr) {
  const box = el("div", "panel");
  box.appendChild(el("h3", "", "Live bytes per callsite across snapshots"));
  const shown = pr.sites.slice(0, 10);
  if (!shown.length) return box;
  const chartBox = el("div");
  box.appendChild(chartBox);
  const xs = pr.totals.map((t, k) => (t.step !== null ? t.step : k));
  const series = [{ label: pr.totals.every((t) => t.step !== null) ? "step" : "snapshot" }];
  for (const s of shown) series.push({ label: (s.leak ? "LEAK " : "") + s.site, stroke: siteColor(s.site), width: s.leak ? 3 : 1, value: (u, v) => v === null ? "" : fmtBytes(v) });
  later(() => {
    new uPlot({
      width: Math.max(500, box.clientWidth || 1000), height: 220,
      scales: { x: { time: false } },
      axes: [{}, { values: (u, vals) => vals.map(fmtBytes), size: 90 }],
      series, legend: { show: false },
    }, [xs, ...shown.map((s) => s.bytes)], chartBox);
    drawn.sites++;
  });
  const rows = pr.sites.map((s) => `<tr class="${s.leak ? "leak" : ""}"><td><span class="sw" style="background:${siteColor(s.site)}"></span>${esc(s.site)}${s.leak ? " <b>leak</b>" : ""}</td>` +
    s.bytes.map((b) => `<td class="num">${fmtBytes(b)}</td>`).join("") + "</tr>").join("");
  box.appendChild(el("table", "sites", `<tr><th>callsite</th>${xs.map((x) => `<th>${series[0].label} ${x}</th>`).join("")}</tr>${rows}`));
  return box;
}

// diffSection (served UI) compares two snapshots, of one process or of
// two, as vramscope diff does: at their peaks, ends or step N, by
// callsite. ?diff=BASE,OTHER[,AT] opens a comparison.
function diffSection(p) {
  const sec = el("section", "process");
  sec.appendChild(el("h2", "", "Compare two snapshots"));
  const snaps = [];
  for (const pr of p.processes) for (const sv of pr.snapshots) snaps.push({ pr, sv });
  const mk = (def) => {
    const s = el("select");
    snaps.forEach(({ pr, sv }) => { const o = el("option", "", esc(`${pr.id} · ${sv.input}`)); o.value = sv.id; s.appendChild(o); });
    if (snaps.length) s.value = snaps[Math.max(0, Math.min(def, snaps.length - 1))].sv.id;
    return s;
  };
  const a = mk(0), b = mk(snaps.length - 1);
  const at = el("select");
  for (const m of ["peak", "end"]) { const o = el("option", "", m); o.value = m; at.appendChild(o); }
  const lines = el("input");
  lines.type = "checkbox";
  const go = el("button", "", "Compare");
  const out = el("div");
  sec.append(el("label", "", "A "), a, el("label", "", " B "), b, el("label", "", " at "), at,
    el("label", "", " by line "), lines, go, out);
  const compare = async () => {
    const d = await api.diff(a.value, b.value, at.value, lines.checked);
    out.innerHTML = "";
    renderDiff(out, d);
  };
  go.addEventListener("click", compare);
  const linked = (new URLSearchParams(location.search).get("diff") || "").split(",");
  if (linked.length >= 2) {
    [a.value, b.value] = linked;
    if (linked[2]) {
      if (![...at.options].some((o) => o.value === linked[2])) at.appendChild(el("option", "", esc(linked[2])));
      at.value = linked[2];
    }
    pending.push(compare());
  }
  return sec;
}

main().catch((e) => {
  console.error(e);
  document.getElementById("status").textContent = "Error: " + (e && e.message ? e.message : e);
});
