#!/usr/bin/env bash
# vramscope analyze of a folder of 64 snapshots, 8 ranks x 8 steps
# (step<k>/train_rank<r>_pid<p>.pickle), each step a file grown from the
# GPU-made bench seed (bench/grow_snapshot.py; the 8 steps grow together, one
# process each), on CORES cores with taskset: wall and CPU time, peak RSS, the
# last progress line, and whether every binary printed the same report. Then
# the same folder under --max-memory 1GiB, and the 64 files one by one.
#
#   bench/run_folder.sh
# Environment:
#   VS=path          vramscope binary (default: build bench/out/vramscope)
#   OLD=path         a second binary to alternate with, e.g. an older build
#   DIR=path         where the folder is made (default bench/out/folder; kept)
#   CORES='16 2'     core counts
#   RUNS=2           runs per binary and core count
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=$PWD/bench/out
mkdir -p "$OUT"
RUNS=${RUNS:-2}
CORES=${CORES:-16 2}
DIR=${DIR:-$OUT/folder}
if [ -z "${VS:-}" ]; then
  VS=$OUT/vramscope
  go build -o "$VS" ./cmd/vramscope || { echo "error: go build failed"; exit 1; }
fi
SEED=testdata/scenarios/out/bench_source/bench_source.pickle.gz
if [ "$(ls "$DIR"/runs/step*/*.pickle 2>/dev/null | wc -l)" != 64 ]; then
  mkdir -p "$DIR/seeds"
  t0=$(date +%s)
  for k in 0 1 2 3 4 5 6 7; do
    python3 bench/grow_snapshot.py "$SEED" "$DIR/seeds/step$k.pickle" --size-mb $((30 + 10 * k)) > /dev/null 2>&1 &
  done
  wait
  echo "grown in $(($(date +%s) - t0)) s"
  for k in 0 1 2 3 4 5 6 7; do
    mkdir -p "$DIR/runs/step$k"
    for r in 0 1 2 3 4 5 6 7; do
      cp "$DIR/seeds/step$k.pickle" "$DIR/runs/step$k/train_rank${r}_pid$((4100 + r)).pickle"
    done
  done
fi
echo "$(ls "$DIR"/runs/step*/*.pickle | wc -l) files, $(du -sb "$DIR/runs" | cut -f1) bytes; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$DIR"/runs/step*/*.pickle > /dev/null
bins="$VS ${OLD:-}"
for r in $(seq "$RUNS"); do
  for c in $CORES; do
    [ "$c" -gt "$(nproc)" ] && continue
    for b in $bins; do
      /usr/bin/time -f "$(basename "$b") cores=$c: %e s wall, %U s user, %S s system, %M KB peak RSS" \
        taskset -c 0-$((c - 1)) "$b" analyze --progress "$DIR/runs" > "$OUT/folder.$(basename "$b").out" 2> "$OUT/folder.err"
      tail -1 "$OUT/folder.err"
    done
  done
done
grep -v "peak RSS" "$OUT/folder.err" | tail -1
if [ -n "${OLD:-}" ]; then
  cmp -s "$OUT/folder.$(basename "$VS").out" "$OUT/folder.$(basename "$OLD").out" && echo "same report" || echo "reports DIFFER"
fi
/usr/bin/time -f "$(basename "$VS") --max-memory 1GiB: %e s wall, %U s user, %S s system, %M KB peak RSS" \
  "$VS" analyze --max-memory 1GiB "$DIR/runs" > "$OUT/folder.1g.out" 2> "$OUT/folder.err"
tail -1 "$OUT/folder.err"
cmp -s "$OUT/folder.1g.out" "$OUT/folder.$(basename "$VS").out" && echo "same report under 1GiB" || echo "report under 1GiB DIFFERS"
t0=$(date +%s%N)
for f in "$DIR"/runs/step*/*.pickle; do "$VS" analyze "$f" > /dev/null; done
echo "one by one: $((($(date +%s%N) - t0) / 1000000)) ms"
