#!/usr/bin/env bash
# gpu-e2e: runs `vramscope record` around real PyTorch programs on a CUDA
# machine and checks what it recorded and concluded; measures the hook's
# overhead. Needs python3 with torch (transformers optional: the Llama case
# is skipped without it), torchrun, and a vramscope binary built elsewhere
# (the GPU machine needs no Go):
#
#   GOOS=linux GOARCH=amd64 go build -o vramscope-linux ./cmd/vramscope   (cgo on: watch loads NVML)
#   scripts/gpu-e2e.sh ./vramscope-linux [OUTDIR]
#
# OUTDIR (default $OUT, else ./gpu-e2e-out) receives results.json and
# results.md (one row per case, the overhead table), logs/ (each run's
# stderr and analysis JSON), timing/ and fixtures/<case>/ (what each case
# recorded, pickles gzipped, files over 5 MB left out, with expected.json),
# small enough to commit. The full recordings stay in a scratch folder
# ($E2E_WORK, default a new /tmp folder). Every case runs under a timeout
# ($E2E_TIMEOUT seconds, default 90) and a failed case does not stop the
# others; once $E2E_BUDGET seconds (default 450) have passed, the cases
# left are reported as skipped, so that a hang cannot cost the results.
# Exits 1 when a case failed. About 4 minutes on an H100.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
e2e=$here/e2e
if [ $# -lt 1 ] || [ ! -x "$1" ]; then
	echo "usage: $0 VRAMSCOPE_BINARY [OUTDIR]" >&2
	exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=${2:-${OUT:-$PWD/gpu-e2e-out}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=${E2E_WORK:-$(mktemp -d /tmp/vramscope-e2e.XXXXXX)}
py=${PYTHON:-python3}
tmo=${E2E_TIMEOUT:-90}
budget=${E2E_BUDGET:-450}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$out/logs" "$out/timing" "$out/fixtures" "$work"
: >"$out/results.jsonl"
start=$SECONDS

"$py" - >"$out/env.json" 2>/dev/null <<'PY' || echo '{}' >"$out/env.json"
import json, platform, sys
import torch
d = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
     "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
     "platform": platform.platform()}
try:
    import transformers
    d["transformers"] = transformers.__version__
except Exception:
    pass
print(json.dumps(d))
PY
echo "gpu-e2e: $(cat "$out/env.json")"
echo "gpu-e2e: binary $bin, results in $out, recordings in $work"

# check NAME RC: judges a case from its analysis and recording folder.
check() {
	local name=$1 rc=$2
	if ! "$py" "$e2e/check.py" case "$name" --rc "$rc" --analysis "$out/logs/$name.json" \
		--dir "$work/$name" --fixtures "$out/fixtures" >>"$out/results.jsonl" 2>>"$out/logs/$name.log"; then
		printf '{"case": "%s", "ok": false, "failures": ["check.py crashed: see logs/%s.log"], "facts": {"rc": %s}}\n' \
			"$name" "$name" "$rc" >>"$out/results.jsonl"
	fi
	echo "== $name: exit $rc, $(tail -n 1 "$out/results.jsonl" | cut -c1-300)"
}

# record_case NAME RECORD_FLAGS... -- COMMAND...: records, analyzes, checks.
record_case() {
	local name=$1
	shift
	in_budget "$name" || return
	rm -rf "${work:?}/$name"
	timeout -k 15 "$tmo" "$bin" record --json --out "$work/$name" "$@" \
		>"$out/logs/$name.json" 2>"$out/logs/$name.log" </dev/null
	check "$name" $?
}

skip() {
	printf '{"case": "%s", "ok": true, "skipped": "%s", "failures": [], "facts": {}}\n' "$1" "$2" >>"$out/results.jsonl"
	echo "== $1: skipped ($2)"
}

# in_budget NAME: whether there is time left for the case NAME.
in_budget() {
	if [ $((SECONDS - start)) -ge "$budget" ]; then
		printf '{"case": "%s", "ok": false, "failures": ["not run: the %ss budget was spent"], "facts": {}}\n' \
			"$1" "$budget" >>"$out/results.jsonl"
		echo "== $1: not run (budget spent)"
		return 1
	fi
}

# 1. The hook leaves alone a Python without torch, and one that imports
# torch but never touches CUDA (as torchrun's agent does).
record_case inert_python -- "$py" -c 'import json, sys; print("no torch here", file=sys.stderr)'
record_case inert_torch -- "$py" -c 'import sys, torch; print("torch", torch.__version__, file=sys.stderr)'

# 2. Training: healthy (a passing gate), leaking (a tripped gate: exit 3), OOM.
record_case healthy --fail-on leak,fragmentation,oom -- "$py" "$e2e/healthy_train.py"
record_case leak --fail-on leak -- "$py" "$e2e/leak_train.py"
record_case oom -- "$py" "$e2e/oom_train.py"

# 3. torchrun, two ranks on one GPU: two processes, rank 1 leaks.
if command -v torchrun >/dev/null; then
	torchrun=(torchrun)
else
	torchrun=("$py" -m torch.distributed.run)
fi
record_case ddp -- "${torchrun[@]}" --standalone --nproc-per-node 2 "$e2e/ddp_train.py"

# 4. A transformers model built from a config (no download).
if "$py" -c 'import transformers' 2>/dev/null; then
	has_llama=1
	record_case llama --fail-on leak,fragmentation,oom -- "$py" "$e2e/llama_train.py"
else
	has_llama=0
	skip llama "transformers is not installed"
fi

# 5. A server with no optimizer: interval dumps, a dump on SIGUSR1 sent to
# record, then SIGINT sent to record reaches the server (exit 130).
server_case() {
	local name=server dir=$work/server
	in_budget "$name" || return
	rm -rf "$dir"
	"$bin" record --json --out "$dir" --steps none --interval 3s --log-interval 1s -- "$py" "$e2e/server.py" --seconds 60 \
		>"$out/logs/$name.json" 2>"$out/logs/$name.log" </dev/null &
	local pid=$!
	(sleep "$tmo" && kill -TERM "$pid" 2>/dev/null) &
	local watchdog=$!
	# The hook announces its signal once the server has initialized CUDA.
	for _ in $(seq 120); do
		compgen -G "$dir/.vramscope/signal-*" >/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	sleep 7
	kill -USR1 "$pid" 2>/dev/null
	sleep 4
	kill -INT "$pid" 2>/dev/null
	wait "$pid"
	local rc=$?
	kill "$watchdog" 2>/dev/null
	wait "$watchdog" 2>/dev/null
	check "$name" "$rc"
}
server_case

# 6. The hook as a module, without record.
module_case() {
	local name=module dir=$work/module
	in_budget "$name" || return
	rm -rf "$dir" "$work/hookmod"
	"$bin" hook --write "$work/hookmod" >"$out/logs/$name.log" 2>&1
	PYTHONPATH="$work/hookmod" timeout -k 15 "$tmo" "$py" "$e2e/module_api.py" "$dir" >>"$out/logs/$name.log" 2>&1
	local rc=$?
	"$bin" analyze --json "$dir" >"$out/logs/$name.json" 2>>"$out/logs/$name.log"
	check "$name" "$rc"
}
module_case

# 7. Overhead: median step time without the hook, with record's defaults
# (history, per-step memory log; the step 2-4 dumps fall in the warm-up),
# and with the memory log alone.
overhead() {
	local prog=$1 steps=60 warmup=15 t=$out/timing
	in_budget "overhead-$prog" || return
	local args=(--steps "$steps" --warmup "$warmup")
	timeout -k 15 "$tmo" "$py" "$e2e/$prog.py" "${args[@]}" --timing "$t/$prog.plain.json" \
		2>"$out/logs/overhead-$prog.plain.log"
	timeout -k 15 "$tmo" "$bin" record --no-analyze --out "$work/overhead-$prog-record" -- \
		"$py" "$e2e/$prog.py" "${args[@]}" --timing "$t/$prog.record.json" 2>"$out/logs/overhead-$prog.record.log"
	timeout -k 15 "$tmo" "$bin" record --no-analyze --out "$work/overhead-$prog-logger" \
		--no-history --steps none --no-oom --final never --signal none -- \
		"$py" "$e2e/$prog.py" "${args[@]}" --timing "$t/$prog.logger.json" 2>"$out/logs/overhead-$prog.logger.log"
	"$py" "$e2e/check.py" dumps "$work/overhead-$prog-record" "$t/$prog.dumps.json"
	echo "== overhead $prog: done"
}
overhead healthy_train
[ "$has_llama" = 1 ] && overhead llama_train

echo "gpu-e2e: $((SECONDS - start)) s"
"$py" "$e2e/check.py" summary "$out"
