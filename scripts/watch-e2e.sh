#!/usr/bin/env bash
# vramscope watch on a real GPU, beside a leaking and a healthy PyTorch
# process (scripts/watch/leak.py, scripts/watch/healthy.py), in one run of
# about 4 minutes.
#
# Usage: scripts/watch-e2e.sh VRAMSCOPE_BINARY OUTDIR
#
# The machine needs an NVIDIA GPU, its driver, python3 with torch and no
# Go. Build the binary beforehand on a linux/amd64 machine (go-nvml needs
# cgo; it loads libnvidia-ml at run time, so no driver is needed to build,
# and a binary built on glibc 2.34 or later runs on any later one):
#
#   CGO_ENABLED=1 GOOS=linux GOARCH=amd64 go build -o bin/vramscope-linux-amd64 ./cmd/vramscope
#   scripts/watch-e2e.sh bin/vramscope-linux-amd64 /tmp/watch-e2e
#
# What it asserts (scripts/watch/monitor.py):
#   * leak.py (16 MiB more every second, kept in a list) is flagged `leak`
#     within WINDOW + 60 s = 120 s of appearing on the GPU;
#   * healthy.py (a warm-up jump after 20 s, a 2 GiB saw-tooth every 15 s
#     through empty_cache) is never flagged `leak`;
#   * /metrics carries DCGM_FI_DEV_FB_USED/FREE for the real GPU and the
#     vramscope_process_* series of both processes;
#   * when the binary has `vramscope record` (the capture hook), leak.py
#     runs under it, watch captures it on the leak verdict and
#     vramscope_process_finding_info names keep_logits in leak.py within
#     WINDOW + 120 s; `watch --dump PID` prints the same. When NVML's pids
#     are not in this pid namespace (a container without the host's pids),
#     the processes are told apart by growth and the capture is reported
#     as not checked.
# It writes results.json and results.md (and the logs) to OUTDIR and exits
# 1 when a promise failed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 2 ]; then
	sed -n '2,30p' "$0" >&2
	exit 1
fi
bin="$(realpath "$1")"
out="$2"
mkdir -p "$out"
window=60
run=180
port=9401
tmp="$(mktemp -d)"

pids=()
cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	du -sb "$tmp/data" >"$out/history-size.txt" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

nvidia-smi -L >"$out/gpu.txt" 2>&1 || true
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' >"$out/torch.txt" 2>&1

"$bin" watch --interval 1s --window "${window}s" --listen "127.0.0.1:$port" --data "$tmp/data" \
	--capture-timeout 60s 2>"$out/watch.log" &
watch=$!
pids+=("$watch")
sleep 2
if ! kill -0 "$watch" 2>/dev/null; then
	echo "watch did not start:" >&2
	cat "$out/watch.log" >&2
	exit 1
fi

hook=0
if "$bin" record --help >/dev/null 2>&1; then
	hook=1
	"$bin" record --out "$tmp/mem" --steps 2,3,4 --no-analyze -- \
		python3 scripts/watch/leak.py "$run" >"$out/leak.log" 2>&1 &
else
	python3 scripts/watch/leak.py "$run" >"$out/leak.log" 2>&1 &
fi
pids+=($!)
python3 scripts/watch/healthy.py "$run" >"$out/healthy.log" 2>&1 &
pids+=($!)

status=0
timeout $((run + 90)) python3 scripts/watch/monitor.py --port "$port" --window "$window" --run "$run" \
	--watch-pid "$watch" --bin "$bin" --hook "$hook" --out "$out" || status=$?
exit "$status"
