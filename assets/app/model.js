// The page's data model. The payload is normalized once, on load (and
// each state, flame graph and diff the served UI fetches, on arrival):
// every field the drawing code reads gets its type, with an empty value
// where the file had nothing (a finding without a place, a snapshot
// without segments or trace, a field a newer or older vramscope did not
// write). The drawing code then reads it as it is, without checks.
/* global normalizeWhatIf */
/* exported normalizePayload, normalizeState, normalizeFlame, normalizeDiff */
"use strict";

const arr = (v) => (Array.isArray(v) ? v : []);
const obj = (v) => (v !== null && typeof v === "object" && !Array.isArray(v) ? v : {});
const num = (v, d = 0) => (typeof v === "number" && Number.isFinite(v) ? v : d);
const numOrNull = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
const str = (v, d = "") => (typeof v === "string" ? v : v === null || v === undefined ? d : String(v));

function normalizePayload(raw) {
  const p = obj(raw);
  return {
    version: num(p.version, 1),
    verdict: str(p.verdict, "unknown"),
    processes: arr(p.processes).map(normalizeProcess),
  };
}

function normalizeProcess(raw, k) {
  const pr = obj(raw);
  const s = obj(pr.stats);
  const totals = arr(pr.totals).map((t) => ({
    input: str(obj(t).input), step: numOrNull(obj(t).step),
    allocated_bytes: num(obj(t).allocated_bytes), reserved_bytes: num(obj(t).reserved_bytes),
  }));
  const snapshots = arr(pr.snapshots).map(normalizeSnapshot);
  const devices = new Set(snapshots.flatMap((sv) => sv.devices.map((dv) => dv.device)));
  const f = pr.focus ? obj(pr.focus) : null;
  return {
    id: str(pr.id, `process ${k + 1}`),
    verdict: str(pr.verdict, "unknown"),
    stats: {
      allocated_bytes: num(s.allocated_bytes), reserved_bytes: num(s.reserved_bytes),
      peak_allocated_bytes: numOrNull(s.peak_allocated_bytes), peak_reserved_bytes: numOrNull(s.peak_reserved_bytes),
      devices: arr(s.devices).map((d) => ({
        device: num(obj(d).device), allocated_bytes: num(obj(d).allocated_bytes), reserved_bytes: num(obj(d).reserved_bytes),
        peak_allocated_bytes: numOrNull(obj(d).peak_allocated_bytes), peak_reserved_bytes: numOrNull(obj(d).peak_reserved_bytes),
      })),
    },
    // multiDevice: the findings must say which GPU each is about.
    multiDevice: devices.size > 1 || arr(s.devices).length > 1,
    inputs: arr(pr.inputs).map((x) => str(x)),
    findings: arr(pr.findings).map(normalizeFinding),
    notes: arr(pr.notes).map((x) => str(x)),
    totals,
    snapshots,
    // One value per snapshot, whatever the site carried.
    sites: arr(pr.sites).map((x) => ({
      site: str(obj(x).site, "?"), leak: obj(x).leak === true,
      bytes: totals.map((_, i) => num(arr(obj(x).bytes)[i])),
    })),
    leaked: pr.leaked ? normalizeFlame(pr.leaked) : null,
    pools: arr(pr.pools).map(normalizePoolChart), // pools.js
    focus: f ? { snapshot: num(f.snapshot, -1), device: num(f.device, -1), state: str(f.state) } : null,
  };
}

function normalizeFrame(raw) {
  const fr = obj(raw);
  return { function: str(fr.function, "?"), file: str(fr.file), line: num(fr.line) };
}

function normalizeFinding(raw) {
  const f = obj(raw);
  return {
    kind: str(f.kind, "finding"), severity: str(f.severity, "low"), title: str(f.title),
    bytes: num(f.bytes), bytes_per_step: num(f.bytes_per_step),
    callsite: f.callsite ? normalizeFrame(f.callsite) : null,
    origin: f.origin ? normalizeFrame(f.origin) : null,
    allocated_via: arr(f.allocated_via).map(normalizeFrame),
    stack: arr(f.stack).map(normalizeFrame),
    evidence: obj(f.evidence), fix: str(f.fix), device: num(f.device),
  };
}

function normalizeSnapshot(raw, k) {
  const sv = obj(raw);
  return {
    id: num(sv.id, k), input: str(sv.input), step: numOrNull(sv.step),
    devices: arr(sv.devices).map(normalizeDevice),
    end_sites: arr(sv.end_sites).map((x) => ({ site: str(obj(x).site, "?"), bytes: num(obj(x).bytes) })),
  };
}

function normalizeDevice(raw) {
  const dv = obj(raw);
  const s = obj(dv.series);
  const x = arr(s.x).map((v) => num(v));
  // Every column as long as x, so that a bucket always has its values.
  const col = (c) => x.map((_, i) => num(arr(c)[i]));
  const series = {
    x_unit: s.x_unit === "us" ? "us" : "event", start_us: num(s.start_us), x,
    first: col(s.first), allocated_min: col(s.allocated_min), allocated_max: col(s.allocated_max),
    reserved_min: col(s.reserved_min), reserved_max: col(s.reserved_max),
  };
  return {
    device: num(dv.device), events: x.length ? num(dv.events) : 0, series,
    markers: arr(dv.markers).map((m) => ({ kind: str(obj(m).kind, "event"), event: num(obj(m).event), x: num(obj(m).x), label: str(obj(m).label) })),
    states: arr(dv.states).map(normalizeState),
    flames: arr(dv.flames).map(normalizeFlame),
    caveats: arr(dv.caveats).map((c) => str(c)),
    whatif: x.length ? normalizeWhatIf(dv.whatif, x.length) : null,
    composition: normalizeComposition(dv.composition),
  };
}

const blockStates = new Set(["allocated", "pending_free", "free"]);

function normalizeState(raw) {
  const st = obj(raw);
  const sites = arr(st.sites).map((x) => ({ label: str(obj(x).label, "?"), stack: arr(obj(x).stack).map((f) => str(f)) }));
  let unknown = -1; // the site of active blocks whose own is missing
  const siteOf = (b) => {
    const i = num(b.site, -1);
    if (b.state === "free") return -1;
    if (Number.isInteger(i) && i >= 0 && i < sites.length) return i;
    if (unknown < 0) unknown = sites.push({ label: "unknown callsite", stack: [] }) - 1;
    return unknown;
  };
  return {
    label: str(st.label, "state"), event: num(st.event, -1),
    allocated_bytes: num(st.allocated_bytes), reserved_bytes: num(st.reserved_bytes), truncated: num(st.truncated),
    segments: arr(st.segments).map((seg) => {
      const g = obj(seg);
      return {
        address: num(g.address), size: Math.max(1, num(g.size)), pool: str(g.pool), stream: num(g.stream),
        blocks: arr(g.blocks).map((blk) => {
          const b = obj(blk);
          const state = blockStates.has(b.state) ? b.state : "free";
          return { offset: num(b.offset), size: num(b.size), requested: num(b.requested), state, site: siteOf({ state, site: b.site }) };
        }),
      };
    }),
    sites,
  };
}

function normalizeFlame(raw) {
  const f = obj(raw);
  const node = (n) => ({ name: str(obj(n).name, "?"), value: num(obj(n).value), children: arr(obj(n).children).map(node) });
  return { label: str(f.label, "live memory"), root: node(f.root) };
}

// normalizeDiff normalizes a comparison of `vramscope diff` (diff.Report):
// a table is null where the comparison did not make it (a dimension it
// was not asked for).
function normalizeDiff(raw) {
  const d = obj(raw);
  const totals = (t) => ({
    allocated_bytes: num(t.allocated_bytes), reserved_bytes: num(t.reserved_bytes),
    peak_allocated_bytes: numOrNull(t.peak_allocated_bytes), peak_reserved_bytes: numOrNull(t.peak_reserved_bytes),
  });
  const side = (raw) => {
    const s = obj(raw);
    return { device: num(s.device, -1), event: num(s.event, -1), label: str(s.label), ...totals(s) };
  };
  const row = (raw) => {
    const r = obj(raw);
    return {
      key: str(r.key), name: str(r.name, "?"), change: str(r.change, "unchanged"),
      a_bytes: num(r.a_bytes), b_bytes: num(r.b_bytes), delta_bytes: num(r.delta_bytes),
      a_blocks: num(r.a_blocks), b_blocks: num(r.b_blocks),
      stack: arr(obj(r.place).stack).map(normalizeFrame),
    };
  };
  const table = (raw) => {
    if (raw === null || raw === undefined) return null;
    const t = obj(raw), rest = obj(t.rest);
    return {
      rows: arr(t.rows).map(row),
      rest: { rows: num(rest.rows), a_bytes: num(rest.a_bytes), b_bytes: num(rest.b_bytes), delta_bytes: num(rest.delta_bytes) },
      unchanged: num(t.unchanged), unchanged_bytes: num(t.unchanged_bytes),
    };
  };
  const sideInfo = (raw) => ({ path: str(obj(raw).path, "?"), torch_version: str(obj(raw).torch_version) });
  return {
    version: num(d.version, 1), at: str(d.at, "peak"), lines: d.lines === true,
    unmatched: arr(d.unmatched).map((u) => str(u)),
    pairs: arr(d.pairs).map((raw) => {
      const p = obj(raw);
      return {
        name: str(p.name), a: sideInfo(p.a), b: sideInfo(p.b),
        settings: arr(p.settings).map((s) => ({ key: str(obj(s).key, "?"), a: str(obj(s).a), b: str(obj(s).b) })),
        torch_versions_differ: p.torch_versions_differ === true,
        devices: arr(p.devices).map((raw) => {
          const dv = obj(raw);
          return {
            summary: str(dv.summary), a: side(dv.a), b: side(dv.b), delta: totals(obj(dv.delta)),
            tables: { callsite: table(dv.callsites), category: table(dv.categories), module: table(dv.modules) },
          };
        }),
      };
    }),
  };
}
