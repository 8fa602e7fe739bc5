"""Ground truth for `vramscope breakdown`: one run recorded two ways at once.

Each workload runs with torch.cuda.memory._record_memory_history (the snapshot
vramscope reads) and, where torch can, torch.profiler's memory profile (the
categories torch itself gives each tensor: parameter, optimizer_state,
gradient, activation, input, temporary, autograd_detail, or unknown). It writes
into OUTDIR:

  NAME.pickle            the snapshot, dumped at the end of the run
  NAME.profile.json      torch's per-tensor timeline: {"events": [[t_ns, action,
                         bytes, category, storage_ptr, allocation_id], ...]},
                         action one of preexisting/create/increment_version/destroy
                         (increment_version gives the bytes moved to the new
                         version's category as a second row), category in
                         snake case or "unknown"
  NAME.json              the objects' own bytes at the dump, with every block's
                         storage pointer: parameters, buffers, gradients,
                         optimizer state and the KV cache, plus torch's counters

usage: record_truth.py WORKLOAD OUTDIR   (WORKLOAD: mlp_adamw llama_train kv_generate fsdp_train)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scenarios"))

import torch  # noqa: E402

import _common  # noqa: E402


def storages(tensors, category):
    """[[ptr, bytes, category], ...] for the distinct CUDA storages of tensors."""
    seen = {}
    for t in tensors:
        if t is None or not isinstance(t, torch.Tensor) or not t.is_cuda:
            continue
        s = t.untyped_storage()
        seen.setdefault(s.data_ptr(), s.nbytes())
    return [[p, n, category] for p, n in sorted(seen.items())]


def objects(model, opt=None, cache=None):
    rows = storages(model.parameters(), "parameter")
    rows += storages(model.buffers(), "buffer")
    rows += storages((p.grad for p in model.parameters()), "gradient")
    if opt is not None:
        rows += storages((t for st in opt.state.values() for t in st.values()), "optimizer_state")
    if cache is not None:
        from _hf import cache_layers

        rows += storages((t for kv in cache_layers(cache) for t in kv), "kv_cache")
    totals = {}
    for _, n, c in rows:
        totals[c] = totals.get(c, 0) + n
    return {"objects_bytes": totals, "objects": rows}


def profile_timeline(prof, path, device="cuda:0"):
    """Write torch's own per-tensor memory timeline with categories (see the module doc)."""
    from torch.profiler._memory_profiler import Action, TensorKey

    mp = prof._memory_profile()
    cats = mp._categories
    dev = torch.device(device)

    def name(key, version):
        c = cats.get(key, version) if isinstance(key, TensorKey) else None
        return "unknown" if c is None else c.name.lower()

    rows = []
    for t, action, (key, version), nbytes in mp.timeline:
        if key.device != dev:
            continue
        ptr = key.storage.ptr if isinstance(key, TensorKey) else None
        aid = key.storage.allocation_id if isinstance(key, TensorKey) else None
        a = action.name.lower()
        if action in (Action.PREEXISTING, Action.CREATE):
            rows.append([t, a, nbytes, name(key, version), ptr, aid])
        elif action == Action.INCREMENT_VERSION:
            rows.append([t, a, -nbytes, name(key, version), ptr, aid])
            rows.append([t, a, nbytes, name(key, version + 1), ptr, aid])
        elif action == Action.DESTROY:
            rows.append([t, a, -nbytes, name(key, version), ptr, aid])
    with open(path, "w") as f:
        json.dump({"device": device, "torch_version": torch.__version__, "events": rows}, f)
    peak, cur, at = 0, 0, None
    by = {}
    peak_by = {}
    for t, a, n, c, _, _ in rows:
        cur += n
        by[c] = by.get(c, 0) + n
        if cur > peak:
            peak, at, peak_by = cur, t, dict(by)
    return {"profile_events": len(rows), "profile_peak_bytes": peak, "profile_peak_t_ns": at,
            "profile_peak_categories": {k: v for k, v in peak_by.items() if v}}


def profiler():
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                   profile_memory=True, record_shapes=True, with_stack=True)


def mlp_adamw(out):
    _common.start_recording(stacks="python")
    torch.manual_seed(0)
    blocks = []
    for _ in range(4):
        blocks += [torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024), torch.nn.LayerNorm(1024)]
    model = torch.nn.Sequential(*blocks).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = [torch.randn(256, 1024) for _ in range(4)]
    with profiler() as prof:
        for x in data:
            opt.zero_grad(set_to_none=True)
            xb = x.cuda()
            loss = model(xb).pow(2).mean()
            loss.backward()
            opt.step()
            del xb, loss
    torch.cuda.synchronize()
    extra = profile_timeline(prof, os.path.join(out, "mlp_adamw.profile.json"))
    extra.update(objects(model, opt))
    extra["steps"] = len(data)
    _common.dump(os.path.join(out, "mlp_adamw.pickle"), "mlp_adamw", extra)


def llama_train(out):
    _common.start_recording(stacks="all")
    from _hf import describe, llama

    model, cfg = llama(vocab=32000, hidden=512, layers=4, heads=8, kv_heads=8, intermediate=1408, use_cache=False)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, cfg.vocab_size, (4, 256), generator=g) for _ in range(3)]
    with profiler() as prof:
        for ids in batches:
            opt.zero_grad(set_to_none=True)
            ids = ids.cuda()
            out_ = model(input_ids=ids, labels=ids)
            out_.loss.backward()
            opt.step()
            del out_, ids
    torch.cuda.synchronize()
    extra = profile_timeline(prof, os.path.join(out, "llama_train.profile.json"))
    extra.update(objects(model, opt))
    extra.update(describe(model))
    extra["steps"] = len(batches)
    _common.dump(os.path.join(out, "llama_train.pickle"), "llama_train", extra)


def kv_generate(out):
    _common.start_recording(stacks="python")
    from _hf import cache_bytes, cache_tokens, describe, llama

    model, cfg = llama(vocab=32000, hidden=512, layers=4, heads=8, kv_heads=8, intermediate=1408, use_cache=True)
    model.eval()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, cfg.vocab_size, (8, 512), generator=g).cuda()
    with torch.inference_mode(), profiler() as prof:
        o = model(input_ids=ids, use_cache=True)
        cache = o.past_key_values
        nxt = o.logits[:, -1:].argmax(-1)
        for _ in range(64):
            o = model(input_ids=nxt, past_key_values=cache, use_cache=True)
            cache = o.past_key_values
            nxt = o.logits[:, -1:].argmax(-1)
        del o
    torch.cuda.synchronize()
    extra = profile_timeline(prof, os.path.join(out, "kv_generate.profile.json"))
    extra.update(objects(model, None, cache))
    extra.update(describe(model))
    extra["cache_bytes"] = cache_bytes(cache)
    extra["cache_tokens"] = cache_tokens(cache)
    _common.dump(os.path.join(out, "kv_generate.pickle"), "kv_generate", extra)


def fsdp_train(out):
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    _common.start_recording(stacks="all")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.LayerNorm(1024), torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                  torch.nn.Linear(4096, 1024)) for _ in range(4)]
    model = torch.nn.Sequential(*layers).cuda()
    for layer in layers:
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = [torch.randn(256, 1024) for _ in range(3)]
    extra = {}
    try:
        with profiler() as prof:
            for x in data:
                opt.zero_grad(set_to_none=True)
                xb = x.cuda()
                model(xb).pow(2).mean().backward()
                opt.step()
                del xb
        torch.cuda.synchronize()
        extra.update(profile_timeline(prof, os.path.join(out, "fsdp_train.profile.json")))
    except Exception as e:  # the profiler's data flow does not always follow FSDP's hooks
        extra["profile_error"] = f"{type(e).__name__}: {e}"
    # FSDP2 parameters are DTensors: count their local shards.
    local = [getattr(p, "_local_tensor", p) for p in model.parameters()]
    rows = storages(local, "parameter") + storages((getattr(p.grad, "_local_tensor", p.grad) for p in model.parameters()), "gradient")
    rows += storages((getattr(t, "_local_tensor", t) for st in opt.state.values() for t in st.values()), "optimizer_state")
    totals = {}
    for _, n, c in rows:
        totals[c] = totals.get(c, 0) + n
    extra.update({"objects_bytes": totals, "objects": rows, "steps": len(data)})
    _common.dump(os.path.join(out, "fsdp_train.pickle"), "fsdp_train", extra)
    dist.destroy_process_group()


WORKLOADS = {f.__name__: f for f in (mlp_adamw, llama_train, kv_generate, fsdp_train)}

if __name__ == "__main__":
    name, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    WORKLOADS[name](out)
