#!/usr/bin/env bash
# Writes cmd/vramscope/default.pgo, the CPU profile `go build` optimizes the
# binary for (profile-guided optimization: Go inlines and lays out the hot
# paths it names, and calls the builder's methods directly where the decoder
# calls them through its sink interfaces). The profile is bench/phases
# -only analyze, which decodes and analyzes as the command does, on the
# bench file (python stacks) on 1, 2 and 16 goroutines and on 300 MB files
# of the cpp and deep_small shapes (bench/run_shapes.sh) on 2, merged.
#
#   bench/pgo.sh
# Environment: FILES (the files, grown as bench/run_shapes.sh grows them when
# missing), PYTHON.
set -eu
cd "$(dirname "$0")/.."
OUT=$PWD/bench/out
mkdir -p "$OUT/pgo"
PYTHON=${PYTHON:-python3}
grow() { # grow SEED MB: the grown file's path, grown if missing
  local f=$OUT/grown_$(basename "${1%%.*}")_per-rep_$2mb.pickle
  [ -f "$f" ] || "$PYTHON" bench/grow_snapshot.py "$1" "$f" --size-mb "$2" >"$f.log"
  echo "$f"
}
bench=$(grow testdata/scenarios/out/bench_source/bench_source.pickle.gz 1000)
cpp=$(grow testdata/breakdown/out/llama_train.pickle.gz 300)
deep=$(grow testdata/breakdown/out/kv_generate.pickle.gz 300)
go build -pgo=off -o "$OUT/phases-nopgo" ./bench/phases
profile() { # profile NAME PROCS FILE RUNS
  GOMAXPROCS=$2 "$OUT/phases-nopgo" -only analyze -runs "$4" -cpuprofile "$OUT/pgo/$1.pprof" "$3" >/dev/null
}
profile bench-1 1 "$bench" 3
profile bench-2 2 "$bench" 6
profile bench-16 16 "$bench" 6
profile cpp-2 2 "$cpp" 10
profile deep-2 2 "$deep" 10
go tool pprof -proto "$OUT"/pgo/{bench-1,bench-2,bench-16,cpp-2,deep-2}.pprof >cmd/vramscope/default.pgo
echo "wrote cmd/vramscope/default.pgo ($(stat -c %s cmd/vramscope/default.pgo) bytes)"
