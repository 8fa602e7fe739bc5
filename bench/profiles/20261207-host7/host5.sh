#!/usr/bin/env bash
# Dec 7 (stop 60): the counting walkers (new) against the head before them (old): run_cores.sh for new, then old and new in turns on 2 and 16 cores.
set -u
D=bench/out/dev2
python3 - <<'PY'
import lzma, shutil, os
for src, dst in [("bench/out/dev2/grown_1000.pickle.xz","bench/out/grown_1000.pickle")]:
    with lzma.open(src) as f, open(dst,"wb") as g: shutil.copyfileobj(f,g,1<<24)
    os.remove(src)
PY
tar xJf $D/bins.tar.xz -C $D && rm $D/bins.tar.xz
chmod +x $D/old $D/new
F=bench/out/grown_1000.pickle
md5sum $F $D/old $D/new > $OUT/md5.txt
probe() { /usr/bin/time -f "probe %e s $(date -u +%T)" python3 -c 's=0
for i in range(30000000): s+=i' 2>&1; }
probe >> $OUT/probe.txt
turns() { # old and new in turns on $1 cores, $2 rounds
  for r in $(seq $2); do
    for b in old new; do
      /usr/bin/time -f "$1 $b %e %U %S %M %R" taskset -c 0-$(($1-1)) $D/$b analyze $F > $OUT/out-$b-$1.txt 2>>$OUT/turns.txt
    done
  done
}
turns 2 4
CORES='1 2 16' PY_CORES='2 16' RUNS=3 VS=$PWD/$D/new FILE=$F bash bench/run_cores.sh > $OUT/cores-new.md 2>&1
mkdir -p $OUT/runs-new && cp bench/out/cores-*.runs $OUT/runs-new/
probe >> $OUT/probe.txt
turns 16 4
turns 2 2
probe >> $OUT/probe.txt
for c in 2 16; do cmp $OUT/out-old-$c.txt $OUT/out-new-$c.txt && echo "$c cores: same output" >> $OUT/turns.txt; done
md5sum $OUT/out-*.txt >> $OUT/md5.txt; rm -f $OUT/out-*.txt
tar cf $OUT/runs.tar -C $OUT runs-new && rm -rf $OUT/runs-new
cat $OUT/md5.txt $OUT/cores-new.md $OUT/probe.txt | grep -v '^$'
echo "cores build wall user sys maxrssKB minflt"; sort -k1,1n -k2,2 -s $OUT/turns.txt
