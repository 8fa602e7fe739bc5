// Helpers that every page's scripts share: sizes, escaping, elements and
// the colour of a callsite.
/* exported fmtBytes, esc, siteColor, el */
"use strict";

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Math.abs(n), u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return (n < 0 ? "-" : "") + (u === 0 ? v.toFixed(0) : v.toFixed(2)) + " " + units[u];
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// siteColor hashes a callsite label to a colour, so that a callsite has
// the same colour in every state, chart and snapshot.
function siteColor(label) {
  let h = 2166136261;
  for (let i = 0; i < label.length; i++) { h ^= label.charCodeAt(i); h = Math.imul(h, 16777619); }
  h >>>= 0;
  return `hsl(${h % 360},${55 + (h >> 9) % 25}%,${45 + (h >> 17) % 15}%)`;
}

function el(tag, cls, html) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (html !== undefined) e.innerHTML = html;
  return e;
}
