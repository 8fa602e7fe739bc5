#!/bin/sh
# Writes the committed fixtures (gzip -n: the same bytes every run). Each
# NAME.log.gz has NAME.truth.json beside it, what the simulator leaked; pools/fixtures_test.go
# checks both (and with --ranks N the truth of each rank). The long log for the speed test is not committed:
#   python3 simulate.py --engine sglang-0.5 --load daily --hours 24 --log-every 1 --idle-check off --prefix dp --ranks 20 --bug --bug-rate 0.01 --truth /tmp/day.truth.json > /tmp/day.log
set -e
cd "$(dirname "$0")"
sim() { name=$1; shift; python3 simulate.py --truth "$name.truth.json" "$@" | gzip -n -9 > "$name.log.gz"; }
sim sglang04_idle_leak        --engine sglang-0.4 --prefix tp   --load steady --hours 4 --bug --bug-rate 1
sim sglang05_heavy_leak       --engine sglang-0.5 --prefix none --load heavy  --hours 6 --bug --bug-rate 0.03 --idle-check off
sim sglang04_dp_bursty_leak   --engine sglang-0.4 --prefix dp   --load bursty --hours 6 --bug --bug-rate 0.5 --idle-check off
sim vllm_abort_leak           --engine vllm                     --load bursty --hours 6 --bug
sim sglang04_heavy_healthy    --engine sglang-0.4 --prefix dp   --load heavy  --hours 6
sim sglang05_bursty_healthy   --engine sglang-0.5 --prefix tp   --load bursty --hours 6
sim sglang05_daily_healthy    --engine sglang-0.5 --prefix none --load daily  --hours 24 --log-every 15 --idle-check off
sim vllm_daily_healthy        --engine vllm                     --load daily  --hours 12
sim sglang05_dp_busy_leak     --engine sglang-0.5 --prefix dp   --load daily  --hours 6 --period 6 --ranks 4 --bug --bug-rate 0.02 --log-every 5 --idle-check off
