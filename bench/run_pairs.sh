#!/usr/bin/env bash
# Two builds side by side: each run starts A and B at once, each pinned with
# taskset to c cores of its own (A on the first c, B on the next c, swapped
# every other run), so that both meet the host's state of the moment. On
# the GPU host, whose speed wanders by 20% and more from one minute to the
# next, runs one after the other could not tell a 10% change; a pair's
# ratio can. Every pair's outputs must match ("DIFFERS" otherwise).
#
#   A="/tmp/old/vramscope analyze" B="bench/out/vramscope analyze" FILE=f bash bench/run_pairs.sh
#   A="/tmp/old/phases -only decode" B="/tmp/new/phases -only decode" FILE=f bash bench/run_pairs.sh
# Environment:
#   A, B         the commands; the file is their last argument
#   FILE         the snapshot
#   CORES='1 2 8'  cores per side (a side gets at most half the machine)
#   RUNS=4       pairs per core count
# Output: a Markdown table (each pair's wall and CPU seconds, B/A), then
# the median ratio per core count.
set -u
: "${A:?set A to the first command}" "${B:?set B to the second command}" "${FILE:?set FILE}"
CORES=${CORES:-1 2 8}
RUNS=${RUNS:-4}
NCPU=$(nproc --all)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat "$FILE" >/dev/null # warm the page cache

# side CORESET NAME CMD...: runs CMD on CORESET, its time in $TMP/NAME.time.
side() {
  local set=$1 name=$2; shift 2
  /usr/bin/time -f "%e %U %S" -o "$TMP/$name.time" taskset -c "$set" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}

medians=()
echo "| cores | run | A on | A wall s | A cpu s | B wall s | B cpu s | B/A wall | output |"
echo "|---:|---:|---|---:|---:|---:|---:|---:|---|"
for c in $CORES; do
  if [ $((2 * c)) -gt "$NCPU" ]; then
    echo "| $c | | | | | | | | skipped: $NCPU CPUs |"
    continue
  fi
  ratios=()
  for r in $(seq "$RUNS"); do
    lo="0-$((c - 1))" hi="$c-$((2 * c - 1))"
    sa=$lo sb=$hi
    if [ $((r % 2)) = 0 ]; then sa=$hi sb=$lo; fi
    # shellcheck disable=SC2086 # A and B are command lines
    side "$sa" a $A "$FILE" &
    # shellcheck disable=SC2086
    side "$sb" b $B "$FILE" &
    wait
    read -r aw au as <"$TMP/a.time"
    read -r bw bu bs <"$TMP/b.time"
    same=same
    # phases prints timings: compare what a command prints otherwise.
    if ! cmp -s <(grep -v '^| ' "$TMP/a.out") <(grep -v '^| ' "$TMP/b.out"); then same=DIFFERS; fi
    ratio=$(awk -v a="$aw" -v b="$bw" 'BEGIN{printf "%.2f", b/a}')
    ratios+=("$ratio")
    echo "| $c | $r | cores $sa | $aw | $(awk -v u="$au" -v s="$as" 'BEGIN{printf "%.2f", u+s}') | $bw | $(awk -v u="$bu" -v s="$bs" 'BEGIN{printf "%.2f", u+s}') | $ratio | $same |"
  done
  med=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR]=$1} END{print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}')
  medians+=("cores $c: B/A wall, median of $RUNS pairs: $med")
done
echo
printf '%s\n' "${medians[@]}"
