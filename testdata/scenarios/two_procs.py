"""two_procs: two processes on the same GPU, verl-style. "actor" (rank 0) trains a
small MLP and is healthy; "rollout" (rank 1) leaks one 16 MiB prompt-embedding
tensor per step into a never-evicted prefix cache (cache_prompt_embeddings).

Each process records from its start, dumps at the end of steps 2, 3, 4 to
OUTDIR/step<N>/<tag>_rank<R>_pid<PID>.pickle and writes a seed-003 memory log
OUTDIR/<tag>_rank<R>_pid<PID>_memory_log.csv (one row per step).

usage: python3 two_procs.py OUTDIR      (parent; spawns both children with subprocess)
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

STEPS = 5
DUMP_STEPS = (2, 3, 4)
LEAK_TOKENS = 2048
LEAK_HIDDEN = 4096
LEAK_BYTES = LEAK_TOKENS * LEAK_HIDDEN * 2      # bf16
ROLES = {"actor": 0, "rollout": 1}

_PREFIX_CACHE = []


# ----------------------------------------------------------------- actor (rank 0)
def actor_build_model(torch):
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 1024)).cuda()


def actor_train_step(torch, model, opt, step):
    g = torch.Generator(device="cuda").manual_seed(step)
    x = torch.randn(256, 1024, device="cuda", generator=g)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss)


# --------------------------------------------------------------- rollout (rank 1)
def rollout_load_weights(torch):
    return torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) * 0.01


def cache_prompt_embeddings(torch, step):
    # prefix cache that is never evicted: the leak (LEAK_BYTES per step)
    emb = torch.full((LEAK_TOKENS, LEAK_HIDDEN), float(step), device="cuda", dtype=torch.bfloat16)
    _PREFIX_CACHE.append(emb)
    return emb


def rollout_generate(torch, w, step):
    emb = cache_prompt_embeddings(torch, step)
    h = emb @ w                      # transient [2048, 4096] bf16
    h = torch.nn.functional.silu(h) @ w
    return float(h[0, 0])


# ------------------------------------------------------------------------ child
def child(out, role, rank):
    os.environ["RANK"] = str(rank)
    import _common as C
    rec = C.start_recording(max_entries=100_000, stacks="python")
    import torch

    pid = os.getpid()
    log = C.MemoryLog(os.path.join(out, f"{role}_rank{rank}_pid{pid}_memory_log.csv"))
    if role == "actor":
        model = actor_build_model(torch)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    else:
        w = rollout_load_weights(torch)
    for step in range(1, STEPS + 1):
        with torch.autograd.profiler.record_function(f"{role}_step#{step}"):
            if role == "actor":
                v = actor_train_step(torch, model, opt, step)
            else:
                v = rollout_generate(torch, w, step)
        torch.cuda.synchronize()
        a_mb, r_mb = log.sample()
        print(f"[two_procs/{role} rank{rank} pid{pid}] step {step}: v={v:.4f} "
              f"allocated_mb={a_mb:.2f} reserved_mb={r_mb:.2f}", flush=True)
        if step in DUMP_STEPS:
            C.dump(C.step_snapshot_path(out, step, role, rank), f"two_procs/{role}",
                   extra={"recording": rec, "step": step, "tag": role,
                          "prefix_cache_len": len(_PREFIX_CACHE)})
        time.sleep(0.3)
    log.close()


# ----------------------------------------------------------------------- parent
def parent(out):
    procs = {}
    for role, rank in ROLES.items():
        env = dict(os.environ, RANK=str(rank), PYTHONUNBUFFERED="1")
        procs[role] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), out, "--role", role, "--rank", str(rank)],
            env=env)
    rcs = {role: p.wait() for role, p in procs.items()}
    pids = {role: p.pid for role, p in procs.items()}
    print(f"[two_procs] children exit codes {rcs} pids {pids}", flush=True)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({
            "scenario": "two_procs",
            "verdict_by_process": {
                f"actor_rank0_pid{pids['actor']}": "healthy",
                f"rollout_rank1_pid{pids['rollout']}": "leak",
            },
            "verdict": "leak",
            "leaking_process": {"tag": "rollout", "rank": 1, "pid": pids["rollout"]},
            "healthy_process": {"tag": "actor", "rank": 0, "pid": pids["actor"]},
            "culprit_functions": ["cache_prompt_embeddings"],
            "retained_by": "module-level list _PREFIX_CACHE (never evicted)",
            "leak_bytes_per_step": LEAK_BYTES,
            "steps": STEPS,
            "dump_steps": list(DUMP_STEPS),
            "snapshot_layout": "step<N>/<tag>_rank<R>_pid<PID>.pickle",
            "memory_logs": "<tag>_rank<R>_pid<PID>_memory_log.csv (seed-003 format, MB)",
            "child_exit_codes": rcs,
        }, f, indent=2, sort_keys=True)
    if any(rcs.values()):
        sys.exit(1)


if __name__ == "__main__":
    if "--role" in sys.argv:
        i = sys.argv.index("--role")
        role = sys.argv[i + 1]
        rank = int(sys.argv[sys.argv.index("--rank") + 1])
        child(sys.argv[1], role, rank)
    else:
        out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "out", "two_procs")
        os.makedirs(out, exist_ok=True)
        parent(out)
