#!/usr/bin/env bash
# What simulating costs beside analyzing: times 'vramscope analyze F',
# 'vramscope simulate --set expandable_segments:True F' and
# 'vramscope simulate --recommend F' on the grown ~1 GB bench file, RUNS
# times each (5 by default), and prints bench/run.sh's table: median wall
# and CPU seconds, median peak RSS, every run's wall time.
#
#   bench/run_simulate.sh                 # builds bench/out/vramscope, grows the file if missing
#   FILE=path RUNS=3 bench/run_simulate.sh
#
# Any of run.sh's environment variables apply (FILE, SEED, SIZE_MB, VS, PIN);
# Python's pickle.load is not timed here (PY=0).
set -euo pipefail
cd "$(dirname "$0")"
RUNS=${RUNS:-5} PY=0 exec ./run.sh \
  'vramscope analyze F' \
  'vramscope simulate --set expandable_segments:True F' \
  'vramscope simulate --recommend F'
