#!/usr/bin/env bash
# Where one machine's time goes, stage by stage and function by function,
# for comparing two machines (the dev VM and the GPU host, whose ratios to
# Python differ): a CPU probe before and after, bench/phases -only findings
# on one core and -only analyze on two, each with a CPU profile, then
# bench/run_cores.sh once on 1, 2 and 16 cores with Python on one: its
# .runs files carry each run's user and system time, page faults and steal. Last,
# bench/counters.py's counts of analyze on one core and on two and of
# Python's pickle.load on one: instructions per cycle and cache, TLB and
# branch misses where the machine has a PMU, the software events anywhere.
#
#   VS=vramscope PHASES=phases FILE=grown_1000.pickle OUT=dir bench/run_stages.sh
#   bench/profile_ratio.sh devvm/cpu1.pb.gz host/cpu1.pb.gz   # then, per function
set -u
: "${VS:?VS=vramscope binary}" "${PHASES:?PHASES=bench/phases binary}" "${FILE:?FILE=snapshot}" "${OUT:?OUT=directory}"
mkdir -p "$OUT"
probe() { /usr/bin/time -f "probe %e s" python3 -c 's=0
for i in range(30000000): s+=i' 2>&1; }
{ date -u; md5sum "$FILE"; nproc; uname -r; lscpu | grep -E 'Model name|L2|L3|Thread|Socket'; cat /sys/kernel/mm/transparent_hugepage/enabled; } >"$OUT/machine.txt" 2>&1
probe >"$OUT/probe.txt"
cat "$FILE" >/dev/null # the page cache, not the disk
GOMAXPROCS=1 taskset -c 0 "$PHASES" -runs 3 -only findings -cpuprofile "$OUT/cpu1.pb.gz" "$FILE" >"$OUT/phases1.md" 2>&1
taskset -c 0-1 "$PHASES" -runs 3 -only analyze -cpuprofile "$OUT/cpu2.pb.gz" "$FILE" >"$OUT/phases2.md" 2>&1
CORES='1 2 16' PY_CORES=1 RUNS=1 VS=$VS FILE=$FILE "$(dirname "$0")/run_cores.sh" >"$OUT/cores.md" 2>&1
for r in analyze-1 analyze-2 analyze-16 python-1; do cp "$(dirname "$0")/out/cores-$r.runs" "$OUT/" 2>/dev/null; done
probe >>"$OUT/probe.txt"
py=$(python3 -c 'import sys; print(sys.executable)') # the interpreter itself, not a shim that runs it
{
  for c in 1 2; do
    echo "## vramscope analyze, $c core(s)"
    taskset -c "0-$((c - 1))" python3 "$(dirname "$0")/counters.py" -- sh -c '"$0" analyze "$1" >/dev/null' "$VS" "$FILE"
    echo
  done
  echo "## Python pickle.load, GC off, 1 core"
  taskset -c 0 python3 "$(dirname "$0")/counters.py" -- "$py" -c 'import gc, pickle, sys; gc.disable(); pickle.load(open(sys.argv[1], "rb"))' "$FILE"
} >"$OUT/counters.md" 2>&1
