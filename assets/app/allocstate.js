// The allocator state view: one row per segment, its blocks drawn to the
// segment's own scale (a 2 MiB segment beside a 1 GiB one would otherwise
// be invisible), coloured by callsite; free space is pale, pending frees
// red. Hovering a block shows its size, state and stack.
/* exported drawAllocState */
function drawAllocState(el, st) {
  el.innerHTML = "";
  const head = document.createElement("div");
  head.className = "state-head";
  head.textContent = `${st.label}: ${st.segments.length} segments, allocated ${fmtBytes(st.allocated_bytes)} of ${fmtBytes(st.reserved_bytes)} reserved` +
    (st.event >= 0 ? ` (after event ${st.event})` : "") +
    (st.truncated ? `; ${st.truncated} smallest segments left out` : "");
  el.appendChild(head);
  if (st.segments.length === 0) {
    const p = document.createElement("p");
    p.textContent = "No segments reserved at this moment.";
    el.appendChild(p);
    return true;
  }
  const labelW = 150, rowH = 14, gap = 3;
  const width = Math.max(400, el.clientWidth - 10);
  const canvas = document.createElement("canvas");
  const h = st.segments.length * (rowH + gap);
  const dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr;
  canvas.height = h * dpr;
  canvas.style.width = width + "px";
  canvas.style.height = h + "px";
  const wrap = document.createElement("div");
  wrap.className = "state-rows";
  wrap.appendChild(canvas);
  el.appendChild(wrap);
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  ctx.font = "11px sans-serif";
  ctx.textBaseline = "middle";
  const barW = width - labelW;
  st.segments.forEach((seg, r) => {
    const y = r * (rowH + gap);
    ctx.fillStyle = "#333";
    ctx.fillText(`${fmtBytes(seg.size)} ${seg.pool}`, 2, y + rowH / 2);
    for (const b of seg.blocks) {
      const x0 = labelW + (b.offset / seg.size) * barW;
      const w = Math.max(1, (b.size / seg.size) * barW);
      ctx.fillStyle = b.state === "free" ? "#e8e8e8" : b.state === "pending_free" ? "#d62728" : siteColor(st.sites[b.site].label);
      ctx.fillRect(x0, y, w, rowH);
      if (b.state !== "free" && b.requested < b.size && w > 4) {
        // Rounding waste: the part of the block nobody asked for.
        const wr = (b.requested / seg.size) * barW;
        ctx.fillStyle = "rgba(255,255,255,0.45)";
        ctx.fillRect(x0 + wr, y, w - wr, rowH);
      }
    }
    ctx.strokeStyle = "#999";
    ctx.strokeRect(labelW + 0.5, y + 0.5, barW - 1, rowH - 1);
  });
  const tip = document.createElement("div");
  tip.className = "tip";
  el.appendChild(tip);
  canvas.addEventListener("mousemove", (ev) => {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    const seg = st.segments[Math.floor(y / (rowH + gap))];
    if (!seg || x < labelW) { tip.style.display = "none"; return; }
    const off = ((x - labelW) / barW) * seg.size;
    const b = seg.blocks.find((b) => off >= b.offset && off < b.offset + b.size);
    if (!b) { tip.style.display = "none"; return; }
    let html = `<b>${fmtBytes(b.size)}</b> ${b.state.replace("_", " ")} at +${fmtBytes(b.offset)} in a ${fmtBytes(seg.size)} ${esc(seg.pool)} segment`;
    if (b.site >= 0) {
      const s = st.sites[b.site];
      html += `<br>requested ${fmtBytes(b.requested)}<br><b>${esc(s.label)}</b>`;
      if (s.stack.length) html += "<pre>" + s.stack.map(esc).join("\n") + "</pre>";
    }
    tip.innerHTML = html;
    tip.style.display = "block";
    tip.style.left = Math.min(x + 12, width - 320) + "px";
    tip.style.top = (wrap.offsetTop + y + 12 - wrap.scrollTop) + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  el.appendChild(stateLegend(st));
  return true;
}

// stateLegend lists the callsites by bytes held, in their colours.
function stateLegend(st) {
  const bytes = st.sites.map(() => 0);
  for (const seg of st.segments) for (const b of seg.blocks) if (b.site >= 0) bytes[b.site] += b.size;
  const order = st.sites.map((_, i) => i).sort((a, b) => bytes[b] - bytes[a]).slice(0, 12);
  const ul = document.createElement("ul");
  ul.className = "legend";
  for (const i of order) {
    const li = document.createElement("li");
    li.innerHTML = `<span class="sw" style="background:${siteColor(st.sites[i].label)}"></span>${fmtBytes(bytes[i])} ${esc(st.sites[i].label)}`;
    ul.appendChild(li);
  }
  const li = document.createElement("li");
  li.innerHTML = `<span class="sw" style="background:#e8e8e8"></span>free (cached) <span class="sw" style="background:#d62728"></span>pending free`;
  ul.appendChild(li);
  return ul;
}
