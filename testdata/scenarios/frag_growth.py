"""frag_growth: variable-size batches make reserved memory climb while allocated
memory returns to the same baseline after every step (seed 001 / seed 003).

Each step serves REQS requests with random (seeded) token counts; the response
length cap grows a little each step, as in RL training. For every request
run_rollout_request() allocates a large transient activation and keeps a smaller
output until the end of the step, so outputs pin pieces of cached segments and
the next, larger activation needs a new segment. At the end of a step all
outputs are freed: allocated is back at baseline, reserved is not.

Variants (same code):
  frag_growth_emptycache.py  : torch.cuda.empty_cache() at the end of every step
  frag_growth_expandable.py  : PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True

Snapshots at the end of steps 2, 3, 4: OUTDIR/step<N>/rollout_rank0_pid<PID>.pickle
Memory log (seed-003 format, one row per step): OUTDIR/rollout_rank0_pid<PID>_memory_log.csv

usage: python3 frag_growth.py OUTDIR
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=100_000, stacks="python")

import torch  # noqa: E402

STEPS = 6
DUMP_STEPS = (2, 3, 4)
REQS = 8
RNG_SEED = 1
ACT_COLS = 32768          # bf16 -> 64 KiB per token (transient activation)
OUT_COLS = 4096           # bf16 -> 8 KiB per token (kept until end of step)
MIN_TOKENS = 256
TAG = "rollout"
WEIGHT_BYTES = 256 * C.MiB


def load_weights():
    return torch.ones(WEIGHT_BYTES // 2, device="cuda", dtype=torch.bfloat16)


def sample_batch(rng, step):
    cap = 1536 + 256 * step
    return [rng.randint(MIN_TOKENS, cap) for _ in range(REQS)]


def run_rollout_request(weights, n_tokens):
    act = torch.empty(n_tokens, ACT_COLS, device="cuda", dtype=torch.bfloat16)
    act.fill_(1.0)
    out = act[:, :OUT_COLS] * weights[:OUT_COLS]       # kept until end of step
    del act
    return out


def rollout_step(weights, lens):
    outputs = []
    for n in lens:
        outputs.append(run_rollout_request(weights, n))
    total = sum(float(o[0, 0]) for o in outputs)
    outputs.clear()
    return total


def main(name="frag_growth", empty_cache_each_step=False):
    out = C.outdir_from_argv(name)
    rng = random.Random(RNG_SEED)
    weights = load_weights()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    log = C.MemoryLog(os.path.join(out, f"{TAG}_rank0_pid{os.getpid()}_memory_log.csv"))
    per_step = []
    for step in range(1, STEPS + 1):
        lens = sample_batch(rng, step)
        with torch.autograd.profiler.record_function(f"rollout_step#{step}"):
            rollout_step(weights, lens)
            if empty_cache_each_step:
                torch.cuda.empty_cache()
        torch.cuda.synchronize()
        a_mb, r_mb = log.sample()
        rec = {"step": step, "tokens": lens,
               "memory_allocated": torch.cuda.memory_allocated(),
               "memory_reserved": torch.cuda.memory_reserved(),
               "max_memory_allocated": torch.cuda.max_memory_allocated(),
               "num_device_alloc": torch.cuda.memory_stats().get("num_device_alloc", 0)}
        per_step.append(rec)
        print(f"[{name}] step {step}: lens={lens} allocated={rec['memory_allocated']} "
              f"reserved={rec['memory_reserved']} max_alloc={rec['max_memory_allocated']}", flush=True)
        if step in DUMP_STEPS:
            C.dump(C.step_snapshot_path(out, step, TAG), name,
                   extra={"recording": REC, "step": step, "tag": TAG, "tokens": lens,
                          "base_allocated_bytes": base})
    log.close()
    expandable = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    fixed = empty_cache_each_step or expandable
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "healthy" if fixed else "fragmentation",
        "fix_of": "frag_growth" if fixed else None,
        "fix": ("empty_cache each step" if empty_cache_each_step else
                ("expandable_segments:True" if expandable else None)),
        "culprit_functions": [] if fixed else ["run_rollout_request"],
        "pinning_function": "run_rollout_request (out kept until rollout_step ends)",
        "leak_bytes_per_step": 0,
        "base_allocated_bytes": base,
        "bytes_per_token": {"activation": ACT_COLS * 2, "output": OUT_COLS * 2},
        "steps": STEPS,
        "dump_steps": list(DUMP_STEPS),
        "rng_seed": RNG_SEED,
        "snapshot_layout": f"step<N>/{TAG}_rank0_pid<PID>.pickle",
        "memory_log": f"{TAG}_rank0_pid<PID>_memory_log.csv (seed-003 format, MB)",
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "per_step": per_step,
        "note": "allocated returns to base_allocated_bytes after every step; compare memory_reserved per step across the three variants",
    })
    del weights


if __name__ == "__main__":
    main()
