#!/usr/bin/env bash
# Dec 8 (stop 62): the report that labels only the live blocks (new, 45f6fc8: the live blocks labelled, their events' phases alone) against the head before it (old, e560ec8) in turns on 2 and 16 cores, then run_cores.sh with new: 2 cores against Python, 7 pairs, and 16 cores.
set -u
D=bench/out/dev2
python3 - <<'PY'
import lzma, shutil, os
with lzma.open("bench/out/dev2/grown_1000.pickle.xz") as f, open("bench/out/grown_1000.pickle","wb") as g: shutil.copyfileobj(f,g,1<<24)
os.remove("bench/out/dev2/grown_1000.pickle.xz")
PY
tar xJf $D/bins.tar.xz -C $D && rm $D/bins.tar.xz
chmod +x $D/old $D/new
F=bench/out/grown_1000.pickle
md5sum $F $D/old $D/new > $OUT/md5.txt
probe() { /usr/bin/time -f "probe %e s $(date -u +%T)" python3 -c 's=0
for i in range(30000000): s+=i' 2>&1; }
turns() { # old and new in turns on $1 cores, $2 rounds
  for r in $(seq $2); do
    for b in old new; do
      /usr/bin/time -f "$1 $b %e %U %S %M %R" taskset -c 0-$(($1-1)) $D/$b analyze $F > $OUT/out-$b-$1.txt 2>>$OUT/turns.txt
    done
  done
}
probe >> $OUT/probe.txt
turns 2 5
turns 16 3
probe >> $OUT/probe.txt
CORES='2 16' PY_CORES='2' RUNS=7 VS=$PWD/$D/new FILE=$F bash bench/run_cores.sh > $OUT/cores.md 2>&1
mkdir -p $OUT/runs && cp bench/out/cores-*.runs $OUT/runs/
md5sum bench/out/cores-analyze-*-1.out >> $OUT/md5.txt
probe >> $OUT/probe.txt
turns 2 3
probe >> $OUT/probe.txt
for c in 2 16; do cmp $OUT/out-old-$c.txt $OUT/out-new-$c.txt && echo "$c cores: same output" >> $OUT/turns.txt; done
md5sum $OUT/out-*.txt >> $OUT/md5.txt; rm -f $OUT/out-*.txt
tar cf $OUT/runs.tar -C $OUT runs && rm -rf $OUT/runs
cat $OUT/md5.txt $OUT/cores.md $OUT/probe.txt | grep -v '^$'
echo "cores build wall user sys maxrssKB minflt"; sort -k1,1n -k2,2 -s $OUT/turns.txt
