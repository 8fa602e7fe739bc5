#!/usr/bin/env bash
# The second call on the warm machine (00:37 UTC): run_cores.sh with new on 2 cores against Python, 8 pairs.
md5sum bench/out/dev2/new > $OUT/md5.txt && rm -f bench/out/cores-*
p() { /usr/bin/time -f "probe %e s $(date -u +%T)" python3 -c 's=0
for i in range(30000000): s+=i' 2>&1; }
p >> $OUT/probe.txt
CORES='2' PY_CORES='2' RUNS=8 VS=$PWD/bench/out/dev2/new FILE=bench/out/grown_1000.pickle bash bench/run_cores.sh > $OUT/cores2b.md 2>&1
p >> $OUT/probe.txt
cp bench/out/cores-*.runs $OUT/
md5sum bench/out/cores-analyze-2-*.out | awk '{print $1}' | sort | uniq -c >> $OUT/md5.txt
