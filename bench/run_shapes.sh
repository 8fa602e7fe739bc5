#!/usr/bin/env bash
# vramscope analyze on ~1 GB snapshots of several shapes, each grown from a
# GPU-made seed with bench/grow_snapshot.py (the growths run at once, one
# core each), timed with bench/run_cores.sh: for issue 15's "peak RSS <= 0.5x
# the file on every input shape".
#
#   python      bench_source: a training loop, Python stacks of 4 frames,
#               blocks of 16 KiB (median), 300 k entries (the bench file)
#   cpp         llama_train: transformers Llama training recorded with
#               stacks="all", 43 frames an entry, 87% of them C++
#   deep_small  kv_generate: transformers generate() with a KV cache, Python
#               stacks of 17.5 frames, blocks of 8 KiB (median)
#   compressed  the python shape, gzip -1 (decoded as a stream, one core)
#   zstd_long   the python shape, zstd -3 --long=27: a 128 MiB window, which
#               a stream's decoder holds beside the decode (needs the zstd tool)
#   piped       the python shape on standard input, through a pipe (copied
#               into a temporary file, then decoded in parts)
#
#   bench/run_shapes.sh
# Environment: SHAPES (all six), SIZE_MB (1000), CORES ('2 16'), RUNS (3),
# PY_CORES ('16'; Python is not timed on the compressed and piped shapes), VS, PYTHON,
# as in bench/run_cores.sh. Output: a run_cores.sh table per shape.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=$PWD/bench/out
mkdir -p "$OUT"
SHAPES=${SHAPES:-python cpp deep_small compressed zstd_long piped}
SIZE_MB=${SIZE_MB:-1000}
PYTHON=${PYTHON:-python3}
export CORES=${CORES:-2 16} RUNS=${RUNS:-3} PYTHON
if [ -z "${VS:-}" ]; then
  VS=$OUT/vramscope
  go build -o "$VS" ./cmd/vramscope || { echo "error: go build failed"; exit 1; }
fi
export VS

seed() {
  case $1 in
  python | compressed | zstd_long | piped) echo testdata/scenarios/out/bench_source/bench_source.pickle.gz ;;
  cpp) echo testdata/breakdown/out/llama_train.pickle.gz ;;
  deep_small) echo testdata/breakdown/out/kv_generate.pickle.gz ;;
  *) return 1 ;;
  esac
}
grown() { local s; s=$(seed "$1") && echo "$OUT/grown_$(basename "${s%%.*}")_per-rep_${SIZE_MB}mb.pickle"; }

for shape in $SHAPES; do
  f=$(grown "$shape") || { echo "error: unknown shape $shape"; exit 1; }
  if [ ! -f "$f" ]; then
    echo "Growing $f from $(seed "$shape") ..."
    "$PYTHON" bench/grow_snapshot.py "$(seed "$shape")" "$f" --size-mb "$SIZE_MB" >"$f.log" 2>&1 &
  fi
done
wait
for shape in $SHAPES; do
  f=$(grown "$shape")
  [ -f "$f" ] || { echo "error: growing $f failed:"; cat "$f.log"; exit 1; }
done

for shape in $SHAPES; do
  f=$(grown "$shape")
  echo
  echo "## shape $shape: $(basename "$f")"
  if [ "$shape" = compressed ] || [ "$shape" = zstd_long ]; then
    z=$f.gz tool=(gzip -1)
    if [ "$shape" = zstd_long ]; then
      command -v zstd >/dev/null || { echo "skipped: no zstd tool"; continue; }
      z=$f.long27.zst tool=(zstd -q -3 --long=27)
    fi
    [ -f "$z" ] || "${tool[@]}" -c "$f" >"$z"
    echo "${tool[*]}: $(stat -c %s "$z") bytes"
    RAW_SIZE=$(stat -L -c %s "$f") FILE=$z PY_CORES= bash bench/run_cores.sh
  elif [ "$shape" = piped ]; then
    STDIN=1 FILE=$f PY_CORES= bash bench/run_cores.sh
  else
    FILE=$f PY_CORES=${PY_CORES-16} bash bench/run_cores.sh
  fi
done
