#!/usr/bin/env bash
# How many times one core's decode rate this host gives with N cores busy:
# N decodes of the same ~1 GB snapshot at once (bench/phases -only decode),
# each in a process of its own pinned to a core of its own, for N = 1, 2, 4,
# 8, 16. A split decode, whose parts each take a core, can go no faster
# than that: on the GPU host's 16 cores sixteen decodes at once each took
# about 1.5 times as long as one alone (bench/RESULTS.md).
#
# Then the floor those rates set for analyze: the CPU seconds that decoding
# and analyzing the file take on one core (bench/phases pinned to one,
# where nothing is split), divided by the rate of N cores. That is how fast
# analyze on N cores could be if all of its work ran in parallel and
# splitting it cost nothing; the last column is what it takes now.
#
#   bench/run_ceiling.sh
# Environment:
#   FILE=path        the snapshot (default: the grown bench file of run_cores.sh)
#   COUNTS='1 2 4 8 16'  decodes at once (those above the machine's cores are
#                    skipped); the rates are against the first
#   PHASES=path      a prebuilt bench/phases binary
#   VS=path          a prebuilt vramscope binary
#   RUNS=3           runs of the one-core phases and of each analyze (medians)
# Output: a Markdown table on stdout, also saved as bench/out/ceiling-<time>.md.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=$PWD/bench/out
mkdir -p "$OUT"
FILE=${FILE:-$OUT/grown_bench_source_per-rep_1000mb.pickle}
COUNTS=${COUNTS:-1 2 4 8 16}
RUNS=${RUNS:-3}
NCPU=$(nproc --all)
[ -f "$FILE" ] || { echo "error: $FILE not found (bench/run_cores.sh grows it)"; exit 1; }
if [ -z "${PHASES:-}" ]; then
  PHASES=$OUT/phases
  go build -pgo=cmd/vramscope/default.pgo -o "$PHASES" ./bench/phases || { echo "error: go build failed"; exit 1; }
fi
if [ -z "${VS:-}" ]; then
  VS=$OUT/vramscope
  go build -o "$VS" ./cmd/vramscope || { echo "error: go build failed"; exit 1; }
fi
exec > >(tee "$OUT/ceiling-$(date +%Y%m%d-%H%M%S).md") 2>&1
cat "$FILE" >/dev/null # warm the page cache

echo "# N decodes at once, one core each"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $NCPU CPUs"
echo "file: $FILE, $(stat -c %s "$FILE") bytes"
echo
echo "| decodes at once | each: min s | median s | max s | rate, times one alone |"
echo "|---:|---:|---:|---:|---:|"
ALONE=
declare -A RATE
for n in $COUNTS; do
  [ "$n" -gt "$NCPU" ] && continue
  pids=()
  for k in $(seq 0 $((n - 1))); do
    taskset -c "$k" "$PHASES" -only decode "$FILE" | awk -F'|' '/ decode /{print $4}' >"$OUT/ceiling-$k.wall" &
    pids+=($!)
  done
  wait "${pids[@]}" # not the tee that stdout goes to
  read -r min med max < <(for k in $(seq 0 $((n - 1))); do cat "$OUT/ceiling-$k.wall"; done | sort -g |
    awk '{v[NR]=$1} END {print v[1], v[int((NR+1)/2)], v[NR]}')
  [ -z "$ALONE" ] && ALONE=$med
  RATE[$n]=$(awk "BEGIN{print $n * $ALONE / $med}")
  printf '| %d | %.2f | %.2f | %.2f | %.1f |\n' "$n" "$min" "$med" "$max" "${RATE[$n]}"
done

# median VALUES...: the median of its arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# One core's work: the CPU seconds of the decode and of analyze
# (analyze.AddSnapshot: replay, findings, steps, breakdown) in bench/phases.
works=()
for k in $(seq "$RUNS"); do
  works+=("$(taskset -c 0 "$PHASES" "$FILE" | awk -F'|' '/ decode | analyze /{s += $5} END {print s}')")
done
WORK=$(median "${works[@]}")
echo
echo "# The floor for analyze on N cores: one core's work / the rate of N"
echo
echo "One core's work: $WORK CPU s (decode and analyze in bench/phases; median of: ${works[*]})"
echo
echo "| cores | rate | floor s | vramscope analyze now: median s ($RUNS runs) |"
echo "|---:|---:|---:|---:|"
for n in $COUNTS; do
  [ -z "${RATE[$n]:-}" ] && continue
  walls=()
  for k in $(seq "$RUNS"); do
    t0=$(date +%s%N)
    taskset -c "0-$((n - 1))" "$VS" analyze "$FILE" >/dev/null
    t1=$(date +%s%N)
    walls+=("$(awk "BEGIN{print ($t1 - $t0) / 1e9}")")
  done
  printf '| %d | %.1f | %.2f | %.2f |\n' "$n" "${RATE[$n]}" "$(awk "BEGIN{print $WORK / ${RATE[$n]}}")" "$(median "${walls[@]}")"
done
