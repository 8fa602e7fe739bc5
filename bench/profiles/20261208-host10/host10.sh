#!/usr/bin/env bash
# Dec 8 (stop 62): the head (45f6fc8) on the GPU host again, for another lease: run_cores.sh on 2 cores against Python (8 pairs) and 16 cores, a CPU probe around it.
set -u
D=bench/out/dev2
python3 - <<'PY'
import lzma, shutil, os
with lzma.open("bench/out/dev2/grown_1000.pickle.xz") as f, open("bench/out/grown_1000.pickle","wb") as g: shutil.copyfileobj(f,g,1<<24)
os.remove("bench/out/dev2/grown_1000.pickle.xz")
PY
tar xJf $D/bins.tar.xz -C $D new && rm $D/bins.tar.xz
F=bench/out/grown_1000.pickle
md5sum $F $D/new > $OUT/md5.txt
probe() { /usr/bin/time -f "probe %e s $(date -u +%T)" python3 -c 's=0
for i in range(30000000): s+=i' 2>&1; }
probe >> $OUT/probe.txt
CORES='2 16' PY_CORES='2' RUNS=8 VS=$PWD/$D/new FILE=$F bash bench/run_cores.sh > $OUT/cores.md 2>&1
probe >> $OUT/probe.txt
mkdir -p $OUT/runs && cp bench/out/cores-*.runs $OUT/runs/
md5sum bench/out/cores-analyze-*-1.out >> $OUT/md5.txt
cat $OUT/md5.txt $OUT/cores.md $OUT/probe.txt | grep -v '^$'
