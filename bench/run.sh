#!/usr/bin/env bash
# vramscope benchmark: decode a ~1 GB real-derived snapshot with vramscope and
# with Python's pickle.load; wall time, MB/s and peak RSS (GNU time -v).
#
#   bench/run.sh                          # times: python (gc off) x3, python (gc on) x1,
#                                         #        'vramscope stats F' x3
#   bench/run.sh 'vramscope stats F' 'vramscope analyze F'
#                                         # the vramscope commands to time (each one
#                                         # argument; F = the snapshot file,
#                                         # vramscope = bench/out/vramscope)
# Environment:
#   FILE=path      time this snapshot instead of finding/generating one
#   SEED=path      seed for the generator (default: the GPU-made bench_source seed,
#                  else snapshot/testdata/format/train.pickle)
#   SIZE_MB=1000   size of the generated file
#   STACKS=per-rep grow_snapshot.py --stacks (per-rep | shared)
#   RUNS=3         runs per fast command (median reported)
#   PY_GC=1        also time pickle.load with the GC on (once; slow); 0 = skip
#   PY=1           time Python at all; 0 = skip both Python rows
#   VS=path        a prebuilt vramscope binary (e.g. cross-compiled for a machine
#                  without Go) instead of building bench/out/vramscope
#   PIN='taskset -c 0,1'
#                  a prefix for every timed command: pins a big machine to the
#                  2 cores of the reference one
# Output: a Markdown report on stdout, also saved as bench/out/report-<time>.md.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
OUT=$ROOT/bench/out
mkdir -p "$OUT"
RUNS=${RUNS:-3}
SIZE_MB=${SIZE_MB:-1000}
STACKS=${STACKS:-per-rep}
PY_GC=${PY_GC:-1}
PYRUN=${PY:-1}
PYTHON=${PYTHON:-python3}
if [ $# -eq 0 ]; then set -- 'vramscope stats F'; fi
REPORT=$OUT/report-$(date +%Y%m%d-%H%M%S).md
exec > >(tee "$REPORT") 2>&1

note() { printf '%s\n' "$*"; }

# timer FILE cmd...: runs cmd, writing GNU time -v's user/system time and peak
# RSS lines to FILE (with Python's getrusage where GNU time is missing).
if [ -x /usr/bin/time ]; then
  timer() { local f=$1; shift; /usr/bin/time -v -o "$f" "$@"; }
else
  timer() {
    local f=$1; shift
    "$PYTHON" -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("User time (seconds): %f\nSystem time (seconds): %f\nMaximum resident set size (kbytes): %d\n" % (u.ru_utime, u.ru_stime, u.ru_maxrss))
sys.exit(rc)' "$f" "$@"
  }
fi
PIN=${PIN:-}

# ---------------------------------------------------------------- vramscope
VS_OK=0
if [ -n "${VS:-}" ]; then
  [ -x "$VS" ] && VS_OK=1 || note "NOTE: VS=$VS is not an executable; vramscope rows are skipped."
elif [ -d cmd/vramscope ] && ls cmd/vramscope/*.go >/dev/null 2>&1; then
  VS=$OUT/vramscope
  if go build -o "$VS" ./cmd/vramscope >"$OUT/build.log" 2>&1; then
    VS_OK=1
  else
    note "NOTE: go build ./cmd/vramscope failed; vramscope rows are skipped (see bench/out/build.log):"
    sed 's/^/    /' "$OUT/build.log" | head -20
  fi
else
  note "NOTE: cmd/vramscope has no Go files yet; vramscope rows are skipped."
fi

# ---------------------------------------------------------------- input file
if [ -z "${FILE:-}" ]; then
  if [ -z "${SEED:-}" ]; then
    for c in testdata/scenarios/out/bench_source/bench_source.pickle \
             testdata/scenarios/out/bench_source/bench_source.pickle.zst \
             testdata/scenarios/out/bench_source/bench_source.pickle.gz; do
      if [ -f "$c" ]; then SEED=$c; break; fi
    done
    if [ -z "${SEED:-}" ]; then
      SEED=snapshot/testdata/format/train.pickle
      note "NOTE: GPU-made seed testdata/scenarios/out/bench_source/bench_source.pickle[.zst|.gz] not found;"
      note "      FALLING BACK to the small fixture $SEED (135 trace entries) as the seed."
    fi
  fi
  base=$(basename "$SEED"); base=${base%%.*}
  FILE=$OUT/grown_${base}_${STACKS}_${SIZE_MB}mb.pickle
  if [ ! -f "$FILE" ] || [ "$SEED" -nt "$FILE" ]; then
    note "Generating $FILE from $SEED ..."
    if ! timer "$OUT/grow.time" "$PYTHON" bench/grow_snapshot.py "$SEED" "$FILE" \
         --size-mb "$SIZE_MB" --stacks "$STACKS" >"$OUT/grow.log" 2>&1; then
      note "error: grow_snapshot.py failed:"; cat "$OUT/grow.log"; exit 1
    fi
    sed 's/^/    /' "$OUT/grow.log"
    note "    generator peak RSS: $(awk -F': ' '/Maximum resident/ {printf "%.0f MB", $2*1024/1e6}' "$OUT/grow.time")"
  fi
else
  SEED=${SEED:-unknown}
fi
[ -f "$FILE" ] || { note "error: $FILE does not exist"; exit 1; }
BYTES=$(stat -c %s "$FILE")

# ---------------------------------------------------------------- timing
ROWS=()
# measure LABEL RUNS cmd...: runs it RUNS times under GNU time -v, appends a table row
measure() {
  local label=$1 n=$2; shift 2
  local walls=() rsss=() cpus=() rc=0 i t0 t1 r
  for ((i = 0; i < n; i++)); do
    t0=$(date +%s%N)
    # shellcheck disable=SC2086 # PIN is a command prefix, split on purpose
    timer "$OUT/time.txt" $PIN "$@" >"$OUT/cmd.out" 2>"$OUT/cmd.err"
    r=$?
    t1=$(date +%s%N)
    [ $r -ne 0 ] && rc=$r
    walls+=("$(( (t1 - t0) / 1000000 ))")
    rsss+=("$(awk -F': ' '/Maximum resident set size/ {print $2}' "$OUT/time.txt")")
    cpus+=("$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%d", s * 1000}' "$OUT/time.txt")")
  done
  local wmed rmed cmed
  cmed=$(printf '%s\n' "${cpus[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  wmed=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  rmed=$(printf '%s\n' "${rsss[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  local row
  row=$(awk -v l="$label" -v n="$n" -v w="$wmed" -v r="$rmed" -v b="$BYTES" -v rc="$rc" -v all="${walls[*]}" -v c="$cmed" 'BEGIN {
      s = w / 1000.0; mb = b / 1e6; rssmb = r * 1024 / 1e6
      printf "| %s | %d | %.2f | %.0f | %.2f | %.0f | %.2fx | %s | %s |", l, n, s, mb / s, c / 1000.0, rssmb, r * 1024 / b, rc, all }')
  ROWS+=("$row")
  if [ $rc -ne 0 ]; then
    note "NOTE: '$label' exited $rc; stderr tail:"; tail -5 "$OUT/cmd.err" | sed 's/^/    /'
  fi
  printf '%s\n' "$row"
}

note ""
note "Warming the page cache: cat $FILE > /dev/null"
cat "$FILE" >/dev/null
note "Timing (each row as it finishes; wall ms of every run in the last column):"
PYLOAD='import gc,pickle,sys; gc.disable(); pickle.load(open(sys.argv[1],"rb"))'
PYLOAD_GC='import pickle,sys; pickle.load(open(sys.argv[1],"rb"))'
if [ "$PYRUN" = 1 ]; then
  measure "python pickle.load, gc.disable()" "$RUNS" "$PYTHON" -c "$PYLOAD" "$FILE"
  if [ "$PY_GC" = 1 ]; then
    measure "python pickle.load, gc on" 1 "$PYTHON" -c "$PYLOAD_GC" "$FILE"
  fi
fi
for c in "$@"; do
  if [ $VS_OK = 1 ]; then
    # word-split the command; 'vramscope' -> the built binary, 'F' -> the file
    read -r -a words <<<"$c"
    argv=()
    for wd in "${words[@]}"; do
      case $wd in
        vramscope) argv+=("$VS") ;;
        F) argv+=("$FILE") ;;
        *) argv+=("$wd") ;;
      esac
    done
    measure "$c" "$RUNS" "${argv[@]}"
  else
    ROWS+=("| $c | 0 | pending (not built) | | | | | | |")
  fi
done

# ---------------------------------------------------------------- report
model=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
mem=$(free -g | awk '/^Mem:/ {print $2}')
note ""
note "## Results: $(date -u +%Y-%m-%dT%H:%MZ)"
note ""
note "File: \`${FILE#"$ROOT"/}\`, $BYTES bytes ($(awk -v b="$BYTES" 'BEGIN {printf "%.1f", b/1e6}') MB), seed \`$SEED\`, stacks=$STACKS"
note ""
note "| command | runs | wall s (median) | MB/s | CPU s (user+sys, median) | peak RSS MB (median) | RSS/file | exit | wall ms, all runs |"
note "|---|---:|---:|---:|---:|---:|---:|---|---|"
printf '%s\n' "${ROWS[@]}"
note ""
note "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (anything near or above nproc means other work shared the CPUs: compare the CPU s column, and rerun when the machine is quiet)"
note "Machine: nproc=$(nproc)${PIN:+, commands run under '$PIN'}, CPU: $model, RAM: ${mem} GB total (free -g), $(go version 2>/dev/null || echo 'go: not found'), $($PYTHON --version 2>&1), kernel $(uname -r)"
note ""
note "Report saved as ${REPORT#"$ROOT"/}"
