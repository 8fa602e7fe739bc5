// The view of `vramscope diff`: what B holds that A did not. It draws a
// normalized diff report (normalizeDiff) into a box, in the static diff
// page (diffpage.js) and in the served UI (?diff=BASE,OTHER). Nothing
// here is computed: every number is the Go side's.
/* global fmtBytes, esc, el */
/* exported renderDiff */
"use strict";

// renderDiff draws report d into box and returns how many rows it drew.
function renderDiff(box, d) {
  let rows = 0;
  const moment = d.at.startsWith("step ") ? `the end of ${d.at}` : `the ${d.at}`;
  box.appendChild(el("h2", "", `Diff at ${esc(moment)}`));
  if (d.unmatched.length) {
    box.appendChild(el("ul", "notes", d.unmatched.map((u) => `<li>left out: ${esc(u)}</li>`).join("")));
  }
  for (const p of d.pairs) {
    const sec = el("section", "diff-pair");
    box.appendChild(sec);
    if (p.name) sec.appendChild(el("h3", "", esc(p.name)));
    const version = (v) => (v ? ` <span class="badge">torch ${esc(v)}</span>` : "");
    sec.appendChild(el("p", "sub", `A: ${esc(p.a.path)}${version(p.a.torch_version)}<br>B: ${esc(p.b.path)}${version(p.b.torch_version)}`));
    if (p.torch_versions_differ) sec.appendChild(el("p", "warn", `torch versions differ: ${esc(p.a.torch_version)} → ${esc(p.b.torch_version)}`));
    if (p.settings.length) {
      sec.appendChild(el("table", "sites diff-settings", "<tr><th>allocator setting</th><th>A</th><th>B</th></tr>" +
        p.settings.map((s) => `<tr><td>${esc(s.key)}</td><td>${esc(s.a || "(absent)")}</td><td>${esc(s.b || "(absent)")}</td></tr>`).join("")));
    }
    if (!p.devices.length) sec.appendChild(el("p", "sub", "Neither snapshot has a device (no segments, no trace events)."));
    for (const dv of p.devices) rows += deviceDiff(sec, dv, d.lines);
  }
  return rows;
}

// signed is a byte difference with its sign.
function signed(n) {
  return (n > 0 ? "+" : "") + fmtBytes(n);
}

// deviceDiff draws one device's headline and tables.
function deviceDiff(sec, dv, lines) {
  const name = dv.a.device === dv.b.device || dv.b.device < 0 ? `cuda:${dv.a.device}`
    : dv.a.device < 0 ? `cuda:${dv.b.device}` : `cuda:${dv.a.device} vs cuda:${dv.b.device}`;
  const at = (side, s) => (s.device < 0 ? `${side} has no such device`
    : s.event < 0 ? `${side} at ${esc(s.label)}` : `${side} at ${esc(s.label)} (event ${s.event})`);
  sec.appendChild(el("h4", "", `${esc(name)}: ${at("A", dv.a)}, ${at("B", dv.b)}`));
  if (dv.summary) sec.appendChild(el("p", "diff-summary", esc(dv.summary)));
  const cell = (v) => (v === null ? "-" : fmtBytes(v));
  const line = (label, k) => {
    const delta = dv.delta[k];
    const cls = delta === null || delta === 0 ? "" : delta > 0 ? "up" : "down";
    return `<tr><td>${label}</td><td class="num">${cell(dv.a[k])}</td><td class="num">${cell(dv.b[k])}</td>` +
      `<td class="num ${cls}">${delta === null ? "-" : signed(delta)}</td></tr>`;
  };
  sec.appendChild(el("table", "sites diff-headline", "<tr><th></th><th>A</th><th>B</th><th>B − A</th></tr>" +
    line("allocated", "allocated_bytes") + line("reserved", "reserved_bytes") +
    line("peak allocated", "peak_allocated_bytes") + line("peak reserved", "peak_reserved_bytes")));
  let rows = 0;
  const titles = { callsite: `By callsite (${lines ? "by line" : "lines merged"})`, category: "By category", module: "By module" };
  for (const [dim, title] of Object.entries(titles)) {
    const t = dv.tables[dim];
    if (!t) continue;
    sec.appendChild(el("h4", "", title));
    sec.appendChild(diffTable(t, dim));
    rows += t.rows.length;
  }
  return rows;
}

// diffTable draws one table: a row per group with its change, both sides'
// bytes and a bar of the difference, scaled to the largest one.
function diffTable(t, dim) {
  const scale = Math.max(1, ...t.rows.map((r) => Math.abs(r.delta_bytes)));
  const body = t.rows.map((r) => {
    const w = Math.round((100 * Math.abs(r.delta_bytes)) / scale);
    const up = r.delta_bytes > 0;
    const stack = r.stack.map((f) => (f.line ? `${f.function} (${f.file}:${f.line})` : `${f.function} (${f.file})`)).join("\n");
    return `<tr class="ch-${esc(r.change)}"><td><span class="badge">${esc(r.change)}</span></td>` +
      `<td class="num">${fmtBytes(r.a_bytes)}</td><td class="num">${fmtBytes(r.b_bytes)}</td>` +
      `<td class="num ${up ? "up" : "down"}">${signed(r.delta_bytes)}</td>` +
      `<td class="bar"><span class="${up ? "up" : "down"}" style="width:${w}%"></span></td>` +
      `<td title="${esc(stack)}">${esc(r.name)}</td></tr>`;
  }).join("");
  const rest = t.rest.rows ? `<tr class="rest"><td>${t.rest.rows} more</td><td class="num">${fmtBytes(t.rest.a_bytes)}</td>` +
    `<td class="num">${fmtBytes(t.rest.b_bytes)}</td><td class="num">${signed(t.rest.delta_bytes)}</td><td></td><td></td></tr>` : "";
  const table = el("table", "sites diff-rows", `<tr><th>change</th><th>A</th><th>B</th><th>B − A</th><th></th><th>${esc(dim)}</th></tr>` +
    (body || `<tr><td colspan="6">no difference</td></tr>`) + rest);
  table.dataset.dimension = dim;
  table.dataset.rows = String(t.rows.length);
  const box = el("div");
  box.appendChild(table);
  if (t.unchanged) box.appendChild(el("p", "notes", `${t.unchanged} unchanged, ${fmtBytes(t.unchanged_bytes)} on each side`));
  return box;
}
