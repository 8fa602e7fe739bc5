#!/usr/bin/env bash
# Dec 7 (stop 61): where a 2-core analyze's time goes on the GPU host: bench/phases traces on 2 cores, per-stage times on 1 and 2.
set -u
D=bench/out/dev2
python3 - <<'PY'
import lzma, shutil, os
with lzma.open("bench/out/dev2/grown_1000.pickle.xz") as f, open("bench/out/grown_1000.pickle","wb") as g: shutil.copyfileobj(f,g,1<<24)
os.remove("bench/out/dev2/grown_1000.pickle.xz")
PY
tar xJf $D/tools.tar.xz -C $D && rm $D/tools.tar.xz
F=bench/out/grown_1000.pickle
probe() { /usr/bin/time -f "probe %e s $(date -u +%T)" python3 -c 's=0
for i in range(30000000): s+=i' 2>&1; }
probe >> $OUT/probe.txt
for r in 1 2 3; do
  for c in 1 2; do
    echo "== $c cores round $r" >> $OUT/phases.txt
    taskset -c 0-$(($c-1)) $D/phases -runs 1 -only analyze $F >> $OUT/phases.txt 2>&1
  done
  taskset -c 0-1 $D/phases -runs 1 -only analyze -trace $OUT/t2-$r.out $F > /dev/null 2>&1
  $D/tracecores $OUT/t2-$r.out > $OUT/cores2-$r.txt 2>&1
  $D/tracecores -each $OUT/t2-$r.out > $OUT/each2-$r.txt 2>&1
  probe >> $OUT/probe.txt
done
taskset -c 0-15 $D/phases -runs 1 -only analyze -trace $OUT/t16.out $F > /dev/null 2>&1
$D/tracecores $OUT/t16.out > $OUT/cores16.txt 2>&1
tar cJf $OUT/traces.tar.xz -C $OUT $(cd $OUT && ls t*.out) && rm $OUT/t*.out
cat $OUT/probe.txt; grep -E "==|decode|analyze" $OUT/phases.txt
