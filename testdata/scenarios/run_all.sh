#!/usr/bin/env bash
# Run every vramscope GPU scenario into OUTDIR (default: ./out next to this script).
#   usage: run_all.sh OUTDIR [TARDIR]
# With TARDIR, OUTDIR is packed into TARDIR/scenarios.tar.xz (bench_source in its own
# TARDIR/bench_source.tar.xz), each split into <15 MB parts (*.partN) if needed.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUTDIR="${1:-$HERE/out}"
TARDIR="${2:-}"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUTDIR/_logs"

SCENARIOS="peak_upcast peak_chunked frag_oom frag_oom_expandable leak_closure leak_fixed \
healthy_train frag_growth frag_growth_emptycache frag_growth_expandable two_procs bench_source \
forward_deep forward_deep_mixed train_deep train_deep_leak backward_all \
depth_loss_upcast depth_loss_upcast_all depth_kv_cache depth_eval_graph depth_kept_view peak_optimizer"
[ -n "${ONLY:-}" ] && SCENARIOS="$ONLY"

echo "== env"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -2
"$PY" -c 'import torch,sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "python", sys.version.split()[0])'

declare -A RC
for s in $SCENARIOS; do
  echo "== $s"
  t0=$(date +%s)
  rm -rf "$OUTDIR/$s"; mkdir -p "$OUTDIR/$s"
  timeout 150 "$PY" "$HERE/$s.py" "$OUTDIR/$s" > "$OUTDIR/_logs/$s.log" 2>&1
  RC[$s]=$?
  tail -n 40 "$OUTDIR/_logs/$s.log"
  echo "== $s rc=${RC[$s]} $(( $(date +%s) - t0 ))s"
done

echo "== summary"
"$PY" - "$OUTDIR" <<'PYEOF'
import json, os, sys
root = sys.argv[1]
for dp, dn, fn in sorted(os.walk(root)):
    dn.sort()
    for f in sorted(fn):
        if f.endswith(".pickle.json"):
            d = json.load(open(os.path.join(dp, f)))
            rel = os.path.relpath(os.path.join(dp, f[:-5]), root)
            print(f"{rel}: alloc={d['allocated_bytes.all.current']} reserved={d['reserved_bytes.all.current']} "
                  f"active={d['active_bytes.all.current']} req={d['requested_bytes.all.current']} "
                  f"max_alloc={d['max_memory_allocated']} max_res={d['max_memory_reserved']} "
                  f"retries={d['num_alloc_retries']} ooms={d['num_ooms']} pickle={d['pickle_bytes']}")
        elif f == "expected.json":
            d = json.load(open(os.path.join(dp, f)))
            print(f"{os.path.relpath(dp, root)}/expected.json: verdict={d.get('verdict')} culprits={d.get('culprit_functions')} leak/step={d.get('leak_bytes_per_step')}")
            if d.get("oom_message"):
                print("   OOM:", d["oom_message"])
            for r in d.get("per_step", []) or []:
                print("   step", r.get("step"), "alloc", r.get("memory_allocated"), "reserved", r.get("memory_reserved"))
PYEOF
for s in $SCENARIOS; do echo "rc $s ${RC[$s]}"; done
du -sh "$OUTDIR"/* 2>/dev/null

if [ -n "$TARDIR" ]; then
  mkdir -p "$TARDIR"
  pack() {  # pack NAME DIRS...
    local name=$1; shift
    tar -C "$OUTDIR" -cf - "$@" | xz -6 -T0 > "$TARDIR/$name.tar.xz"
    local sz; sz=$(stat -c %s "$TARDIR/$name.tar.xz")
    if [ "$sz" -gt 15000000 ]; then
      split -b 15000000 -d -a 1 "$TARDIR/$name.tar.xz" "$TARDIR/$name.tar.xz.part" && rm "$TARDIR/$name.tar.xz"
    fi
  }
  others=$(cd "$OUTDIR" && ls -d */ _logs 2>/dev/null | sed 's#/$##' | grep -v '^bench_source$' | sort -u)
  pack scenarios $others
  [ -d "$OUTDIR/bench_source" ] && pack bench_source bench_source
  ls -l "$TARDIR"
fi
