// The static page of `vramscope diff --html`: the comparison is embedded
// as window.VRAMSCOPE_PAYLOAD and drawn once.
/* global renderDiff, normalizeDiff */
"use strict";

(function main() {
  const status = document.getElementById("status");
  try {
    const d = normalizeDiff(window.VRAMSCOPE_PAYLOAD);
    document.body.dataset.rows = String(renderDiff(document.getElementById("app"), d));
    document.body.dataset.pairs = String(d.pairs.length);
    status.textContent = "";
  } catch (e) {
    console.error(e);
    status.textContent = "Error: " + (e && e.message ? e.message : e);
  }
  document.body.dataset.drawn = "1";
})();
