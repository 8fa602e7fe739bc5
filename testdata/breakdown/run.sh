#!/usr/bin/env bash
# Record every breakdown ground-truth workload into OUTDIR (default ./out), then gzip.
#   usage: run.sh [OUTDIR]     (on the GPU machine: python3 with torch and transformers)
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/out}"
mkdir -p "$OUT"
for w in ${ONLY:-mlp_adamw llama_train kv_generate fsdp_train}; do
  echo "== $w"
  t0=$(date +%s)
  timeout 240 python3 "$HERE/record_truth.py" "$w" "$OUT" > "$OUT/$w.log" 2>&1
  echo "== $w rc=$? $(( $(date +%s) - t0 ))s"; tail -n 15 "$OUT/$w.log"
done
for f in "$OUT"/*.pickle "$OUT"/*.profile.json; do [ -f "$f" ] && gzip -9 -n -f "$f"; done
ls -la "$OUT"
