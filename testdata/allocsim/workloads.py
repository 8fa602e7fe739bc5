"""Allocator ground-truth workloads for vramscope's allocator model (issue 18).

Each workload issues the same sequence of allocation requests whatever the
allocator setting: fixed shapes, seeded randomness, no decision taken from free
memory. Run one workload under one setting in a fresh process:

  PYTORCH_CUDA_ALLOC_CONF=... python3 workloads.py WORKLOAD RESULT.json \
      [--snapshot OUT.pickle.gz] [--stacks] [--fraction F] [--empty-cache]

--fraction F     torch.cuda.set_per_process_memory_fraction(F) before any allocation
--empty-cache    torch.cuda.empty_cache() right after each step's record_function
--snapshot PATH  record the allocator history from the start and dump it gzipped
--stacks         record Python stacks (else context=None: trace only, small file)

Every step runs inside record_function("<workload>_step#N"), so the step ends are
visible in the snapshot's annotations. The result JSON holds torch's own numbers
(max_memory_reserved, max_memory_allocated, retries, device allocs/frees) and, on
an OutOfMemoryError, the step and the message; the program stops at the first OOM.
"""
import argparse
import gzip
import json
import os
import random
import shutil
import sys
import time
import traceback

import torch

MiB = 1 << 20


def step_scope(name, step, empty_cache):
    """Context manager: the step's annotation, then empty_cache() if asked."""
    class _Scope:
        def __enter__(self):
            self.rf = torch.autograd.profiler.record_function(f"{name}_step#{step}")
            self.rf.__enter__()

        def __exit__(self, *exc):
            self.rf.__exit__(*exc)
            if empty_cache and exc[0] is None:
                torch.cuda.empty_cache()
            return False
    return _Scope()


def train_varlen(state, empty_cache):
    """A small transformer trained with AdamW on batches of seeded random lengths."""
    torch.manual_seed(0)
    rng = random.Random(1)
    d, vocab = 1024, 8192
    layer = torch.nn.TransformerEncoderLayer(d_model=d, nhead=16, dim_feedforward=4 * d,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=6,
                                                            enable_nested_tensor=False),
                                torch.nn.Linear(d, vocab)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    for step in range(1, 9):
        state["step"] = step
        seq = rng.randint(64, 1024)
        batch = 8
        with step_scope("train_varlen", step, empty_cache):
            x = torch.randn(batch, seq, d, device="cuda")
            y = torch.randint(0, vocab, (batch, seq), device="cuda")
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, vocab), y.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del x, y, logits, loss
        torch.cuda.synchronize()


def varbatch(state, empty_cache):
    """Variable-size batches: a large transient per request, a smaller output kept
    until the end of the step (outputs pin pieces of cached segments)."""
    rng = random.Random(1)
    weights = torch.ones(256 * MiB // 2, device="cuda", dtype=torch.bfloat16)
    for step in range(1, 9):
        state["step"] = step
        cap = 1536 + 256 * step
        lens = [rng.randint(256, cap) for _ in range(8)]
        with step_scope("varbatch", step, empty_cache):
            outs = []
            for n in lens:
                act = torch.empty(n, 32768, device="cuda", dtype=torch.bfloat16)
                act.fill_(1.0)
                outs.append(act[:, :4096] * weights[:4096])
                del act
            float(sum(o[0, 0] for o in outs))
            outs.clear()
        torch.cuda.synchronize()


def fsdp_gather(state, empty_cache):
    """FSDP-style: sharded flat parameters, each layer's full parameters gathered
    into a fresh buffer (the next one prefetched), activations kept for backward,
    gradients reduced into shards. Layer sizes and token counts are seeded."""
    rng = random.Random(2)
    world = 8
    layers = 16
    full_sizes = [rng.randint(96, 224) * MiB for _ in range(layers)]
    shards = [torch.zeros(s // world // 2, device="cuda", dtype=torch.bfloat16) for s in full_sizes]
    grads = [torch.zeros_like(s) for s in shards]

    def gather(i):
        buf = torch.empty(full_sizes[i] // 2, device="cuda", dtype=torch.bfloat16)
        for r in range(world):
            buf[r * shards[i].numel():(r + 1) * shards[i].numel()].copy_(shards[i])
        return buf

    for step in range(1, 6):
        state["step"] = step
        tokens = rng.randint(2048, 8192)
        with step_scope("fsdp_gather", step, empty_cache):
            acts = []
            nxt = gather(0)
            for i in range(layers):
                cur = nxt
                nxt = gather(i + 1) if i + 1 < layers else None
                a = torch.empty(tokens, 4096 + 512 * (i % 3), device="cuda", dtype=torch.bfloat16)
                a.fill_(float(cur[0]))
                acts.append(a)
                del cur
            nxt = gather(layers - 1)
            for i in reversed(range(layers)):
                cur = nxt
                nxt = gather(i - 1) if i > 0 else None
                g = torch.empty_like(cur)
                g.fill_(1.0)
                grads[i].add_(g[:grads[i].numel()])
                del g, cur
                acts.pop()
        torch.cuda.synchronize()


def weight_update(state, empty_cache):
    """Serving with in-place weight updates: weights loaded bucket by bucket through
    flat transient buffers while request outputs stay alive across the update."""
    rng = random.Random(3)
    sizes = [rng.choice([8, 12, 16, 24, 32, 48, 64]) * MiB for _ in range(60)]
    params = [torch.zeros(s // 2, device="cuda", dtype=torch.bfloat16) for s in sizes]
    kept = []
    for step in range(1, 7):
        state["step"] = step
        with step_scope("weight_update", step, empty_cache):
            # serve: variable requests; outputs survive until after the next update
            new_kept = []
            for _ in range(6):
                n = rng.randint(512, 4096)
                act = torch.empty(n, 16384, device="cuda", dtype=torch.bfloat16)
                act.fill_(1.0)
                new_kept.append(act[:, :2048].clone())
                del act
            # update: buckets of about 400 MiB, each a flat transient
            i = 0
            while i < len(params):
                j, total = i, 0
                while j < len(params) and total + sizes[j] <= 400 * MiB:
                    total += sizes[j]
                    j += 1
                j = max(j, i + 1)
                total = sum(sizes[i:j])
                bucket = torch.empty(total // 2, device="cuda", dtype=torch.bfloat16)
                bucket.fill_(float(step))
                off = 0
                for k in range(i, j):
                    n = sizes[k] // 2
                    params[k].copy_(bucket[off:off + n])
                    off += n
                del bucket
                i = j
            kept.clear()
            kept = new_kept
        torch.cuda.synchronize()


def two_streams(state, empty_cache):
    """Work split over two streams: tensors made on the main stream are used on a
    side stream (record_stream), so their frees wait for the side stream; the side
    stream also allocates in its own pool. A long side-stream matmul keeps the
    pending frees pending until the explicit synchronize at the step end."""
    rng = random.Random(4)
    side = torch.cuda.Stream()
    w = torch.randn(8192, 8192, device="cuda")
    for step in range(1, 7):
        state["step"] = step
        with step_scope("two_streams", step, empty_cache):
            for _ in range(4):
                n = rng.randint(1024, 4096)
                x = torch.randn(n, 8192, device="cuda")
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    y = x @ w
                    y = y @ w
                    z = y.sum(dim=1)
                x.record_stream(side)
                del x, y
                tmp = torch.empty(rng.randint(1024, 4096), 8192, device="cuda")
                tmp.fill_(2.0)
                del tmp
                torch.cuda.current_stream().wait_stream(side)
                z.record_stream(torch.cuda.current_stream())
                del z
            side.synchronize()
        torch.cuda.synchronize()


WORKLOADS = {f.__name__: f for f in (train_varlen, varbatch, fsdp_gather, weight_update, two_streams)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("result")
    ap.add_argument("--snapshot")
    ap.add_argument("--stacks", action="store_true")
    ap.add_argument("--fraction", type=float)
    ap.add_argument("--empty-cache", action="store_true")
    a = ap.parse_args()

    if a.snapshot:
        if a.stacks:
            torch.cuda.memory._record_memory_history(enabled="all", context="all",
                                                     stacks="python", max_entries=500_000)
        else:
            torch.cuda.memory._record_memory_history(enabled="all", context=None,
                                                     max_entries=500_000)
    torch.cuda.init()
    total = int(torch.cuda.get_device_properties(0).total_memory)
    if a.fraction is not None:
        torch.cuda.set_per_process_memory_fraction(a.fraction)
    res = {"workload": a.workload, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           "fraction": a.fraction,
           "limit_bytes": int(a.fraction * total) if a.fraction is not None else None,
           "empty_cache_at_step_end": a.empty_cache, "device_total_memory": total,
           "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
           "device_name": torch.cuda.get_device_name(0), "oom": False}
    state = {"step": 0}
    t0 = time.time()
    try:
        WORKLOADS[a.workload](state, a.empty_cache)
    except torch.OutOfMemoryError as e:
        res["oom"] = True
        res["oom_step"] = state["step"]
        res["oom_message"] = str(e).splitlines()[0][:600]
    res["seconds"] = round(time.time() - t0, 3)
    torch.cuda.synchronize()
    s = torch.cuda.memory_stats()
    res["max_memory_reserved"] = int(torch.cuda.max_memory_reserved())
    res["max_memory_allocated"] = int(torch.cuda.max_memory_allocated())
    for k in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free",
              "reserved_bytes.all.current", "allocated_bytes.all.current",
              "requested_bytes.all.peak", "active_bytes.all.peak"):
        res[k] = int(s.get(k, 0))
    if a.snapshot:
        raw = a.snapshot[:-3] if a.snapshot.endswith(".gz") else a.snapshot
        os.makedirs(os.path.dirname(raw) or ".", exist_ok=True)
        torch.cuda.memory._dump_snapshot(raw)
        if a.snapshot.endswith(".gz"):
            with open(raw, "rb") as fi, gzip.open(a.snapshot, "wb", compresslevel=9) as fo:
                shutil.copyfileobj(fi, fo)
            os.remove(raw)
        res["snapshot"] = os.path.basename(a.snapshot)
        res["snapshot_bytes"] = os.path.getsize(a.snapshot)
    with open(a.result, "w") as f:
        json.dump(res, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
