#!/usr/bin/env bash
# vramscope on 1, 2, 4, 8 and 16 cores: `vramscope analyze F` pinned with taskset
# to the first c cores (Go sizes GOMAXPROCS from that CPU mask, and from the
# cgroup's CPU quota), against Python's pickle.load with the GC off pinned the
# same way, on a ~1 GB snapshot grown from the GPU-made seed. Every vramscope
# run's output must be the 1-core run's, byte for byte (a row says "DIFFERS"
# otherwise). On a core count Python is timed on, its runs alternate with
# vramscope's, and the speedup is the median of each pair's ratio: the
# 16-core GPU host's speed moves by up to 2x within minutes, so Python's
# runs all before vramscope's could not be compared with them.
#
#   bench/run_cores.sh
# Environment:
#   FILE=path        time this snapshot instead of growing one
#   RAW_SIZE=bytes   the size RSS/file and MB/s refer to, for a compressed FILE
#   SEED=path        seed to grow (default testdata/scenarios/out/bench_source/bench_source.pickle.gz)
#   SIZE_MB=1000     size of the grown file
#   CORES='1 2 4 8 16'  core counts (those above the machine's are skipped)
#   RUNS=5           runs per row (medians reported)
#   PY_CORES='2 16'  core counts Python is timed on; PY_CORES= skips it
#   VS=path          a prebuilt vramscope binary instead of building bench/out/vramscope
#   STDIN=1          feed FILE to vramscope through a pipe (cat FILE | vramscope analyze -)
#   PYTHON=python3
# Output: a Markdown table on stdout, also saved as bench/out/cores-<time>.md.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=$PWD/bench/out
mkdir -p "$OUT"
RUNS=${RUNS:-5}
SIZE_MB=${SIZE_MB:-1000}
CORES=${CORES:-1 2 4 8 16}
PY_CORES=${PY_CORES-2 16}
PYTHON=${PYTHON:-python3}
NCPU=$(nproc --all)
REPORT=$OUT/cores-$(date +%Y%m%d-%H%M%S).md
exec > >(tee "$REPORT") 2>&1

if [ -z "${VS:-}" ]; then
  VS=$OUT/vramscope
  go build -o "$VS" ./cmd/vramscope || { echo "error: go build failed"; exit 1; }
fi
if [ -z "${FILE:-}" ]; then
  SEED=${SEED:-testdata/scenarios/out/bench_source/bench_source.pickle.gz}
  FILE=$OUT/grown_$(basename "${SEED%%.*}")_per-rep_${SIZE_MB}mb.pickle
  if [ ! -f "$FILE" ]; then
    echo "Growing $FILE from $SEED (about 7 minutes of one core per GB) ..."
    "$PYTHON" bench/grow_snapshot.py "$SEED" "$FILE" --size-mb "$SIZE_MB" >"$OUT/grow.log" 2>&1 ||
      { echo "error: grow_snapshot.py failed:"; cat "$OUT/grow.log"; exit 1; }
  fi
fi
SIZE=${RAW_SIZE:-$(stat -c %s "$FILE")}
cat "$FILE" >/dev/null # warm the page cache: these are not disk numbers

# pin C: the taskset prefix for the first C cores, the cores steal counts.
pin() { echo "taskset -c 0-$(($1 - 1))"; }

# steal C: the jiffies the hypervisor has taken from pin's C cores since
# boot (/proc/stat's eighth column): the GPU host is a VM whose slow spells
# may be its neighbours', and a run's steal tells them apart from its own
# work.
steal() { awk -v c="$1" '$1 ~ /^cpu[0-9]+$/ && substr($1, 4) + 0 < c { s += $9 } END { print s + 0 }' /proc/stat; }
HZ=$(getconf CLK_TCK)

# run1 NAME C CMD...: runs CMD once on C cores, stdout to
# $OUT/cores-NAME-C-K.out (K counts the runs of NAME on C); appends its wall
# seconds, peak RSS MB, exit status, user and system CPU seconds, minor
# page faults and the seconds stolen from its cores to $OUT/cores-NAME-C.runs.
run1() {
  local name=$1 c=$2; shift 2
  local runs=$OUT/cores-$name-$c.runs t0 t1 rc s0 s1
  local k=$(($(cat "$runs" 2>/dev/null | wc -l) + 1))
  s0=$(steal "$c")
  t0=$(date +%s%N)
  /usr/bin/time -f '%M %U %S %R' -o "$OUT/cores.time" $(pin "$c") "$@" >"$OUT/cores-$name-$c-$k.out" 2>"$OUT/cores-$name.err"
  rc=$?
  t1=$(date +%s%N)
  s1=$(steal "$c")
  set -- $(tail -1 "$OUT/cores.time") # peak KB, user s, system s, faults
  echo "$(awk "BEGIN{print ($t1 - $t0) / 1000000000}") $(awk -v kb="$1" 'BEGIN{print kb * 1024 / 1000000}') $rc $2 $3 $4 $(awk -v d=$((s1 - s0)) -v hz="$HZ" 'BEGIN{print d / hz}')" >>"$runs"
}

# worst NAME C: the worst exit status of NAME's runs on C cores.
worst() { cut -d' ' -f3 "$OUT/cores-$1-$2.runs" | sort -g | tail -1; }

# median: the median of the numbers on stdin.
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# row NAME C: prints the table's columns from cores to steal of NAME's
# runs on C cores (medians).
row() {
  local runs=$OUT/cores-$1-$2.runs wall rss stolen
  wall=$(cut -d' ' -f1 "$runs" | median)
  rss=$(cut -d' ' -f2 "$runs" | median)
  stolen=$(cut -d' ' -f7 "$runs" | median)
  printf '%d | %.2f | %.0f | %.0f | %.2f | %.2f' "$2" "$wall" "$(awk "BEGIN{print $SIZE / 1000000 / $wall}")" "$rss" "$(awk "BEGIN{print $rss * 1000000 / $SIZE}")" "$stolen"
}

echo "# vramscope analyze by cores"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $NCPU CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
echo "file: $FILE${STDIN:+ (piped to vramscope)}, $SIZE bytes; $RUNS runs per row, medians; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| command | cores | wall s | MB/s | peak RSS MB | RSS/file | stolen s | vs Python on as many cores (median of the pairs' ratios) | output |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
REF=
for c in $CORES; do
  [ "$c" -gt "$NCPU" ] && continue
  py=
  for p in $PY_CORES; do [ "$p" = "$c" ] && py=1; done
  rm -f "$OUT/cores-python-$c.runs" "$OUT/cores-analyze-$c.runs"
  for k in $(seq "$RUNS"); do
    [ -n "$py" ] && run1 python "$c" "$PYTHON" -c 'import gc, pickle, sys
gc.disable()
with open(sys.argv[1], "rb") as f:
    pickle.load(f)' "$FILE"
    if [ -n "${STDIN:-}" ]; then
      run1 analyze "$c" sh -c 'cat "$1" | exec "$2" analyze -' sh "$FILE" "$VS"
    else
      run1 analyze "$c" "$VS" analyze "$FILE"
    fi
  done
  speedup=
  if [ -n "$py" ]; then
    printf '| python pickle.load, gc off | %s | | exit %d |\n' "$(row python "$c")" "$(worst python "$c")"
    speedup=$(printf '%.1fx' "$(paste -d' ' <(cut -d' ' -f1 "$OUT/cores-python-$c.runs") <(cut -d' ' -f1 "$OUT/cores-analyze-$c.runs") | awk '{print $1 / $2}' | median)")
  fi
  same=same
  for k in $(seq "$RUNS"); do
    [ -z "$REF" ] && REF=$OUT/cores-analyze-$c-1.out
    cmp -s "$REF" "$OUT/cores-analyze-$c-$k.out" || same=DIFFERS
  done
  printf '| vramscope analyze | %s | %s | %s, exit %d |\n' "$(row analyze "$c")" "$speedup" "$same" "$(worst analyze "$c")"
done
echo
echo "stolen s: the time the hypervisor ran something else on the run's cores (/proc/stat's steal), a median like the rest."
echo "Targets (issue 15): analyze <= 0.5 s on 16 cores and <= 2 s on 2; >= 6x Python on 2 cores, >= 15x on 16; peak RSS <= 0.5x the file."
