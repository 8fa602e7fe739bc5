"""depth_kv_cache: a chat server that keeps every session's past_key_values.

A 8-layer LlamaForCausalLM (random weights, bf16, GQA with 8 KV heads of 64)
serves 8 chat sessions. Each server step every session sends a new message:
its 1016 prompt tokens are prefilled and 8 tokens are decoded greedily, with
the session's transformers DynamicCache passed back in. DynamicCache grows by
torch.cat (transformers/cache_utils.py) and the server keeps every session's
cache in `sessions` forever, so each step adds 8 x 1024 tokens x 16 KiB =
128 MiB of live cache. Inference runs under torch.no_grad().

The user's lines are serve_turn's `out = model(...)` calls; the library line
is the torch.cat in the cache's update.

Snapshots at the end of steps 2, 3, 4: OUTDIR/step<N>/server_rank0_pid<PID>.pickle

usage: python3 depth_kv_cache.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=200_000, stacks="python")

import torch  # noqa: E402

import _hf  # noqa: E402

VOCAB = 32000
HIDDEN = 1024
LAYERS = 8
HEADS, KV_HEADS = 16, 8
SESSIONS = 8
PROMPT = 1016
DECODE = 8
STEPS = 5
DUMP_STEPS = (2, 3, 4)
TAG = "server"


def new_cache():
    try:
        from transformers import DynamicCache
    except ImportError:
        from transformers.cache_utils import DynamicCache
    try:
        return DynamicCache()
    except TypeError:  # releases whose DynamicCache wants the config
        return None


def serve_turn(model, sessions, sid, prompt_ids):
    """One chat turn: prefill the new message on top of the session's cache, decode DECODE tokens."""
    cache = sessions.get(sid)
    if cache is None:
        cache = new_cache()
    keep_last = _hf.logits_kwargs(model, 1)
    out = model(input_ids=prompt_ids, past_key_values=cache, use_cache=True, **keep_last)
    cache = out.past_key_values
    token = out.logits[:, -1].argmax(dim=-1, keepdim=True)
    reply = [token]
    for _ in range(DECODE - 1):
        out = model(input_ids=token, past_key_values=cache, use_cache=True, **keep_last)
        cache = out.past_key_values
        token = out.logits[:, -1].argmax(dim=-1, keepdim=True)
        reply.append(token)
    sessions[sid] = cache  # kept for the session's next turn, never evicted
    return torch.cat(reply, dim=1).tolist()


def server_step(model, sessions, step):
    g = torch.Generator(device="cuda").manual_seed(1000 + step)
    for sid in range(SESSIONS):
        prompt_ids = torch.randint(0, VOCAB, (1, PROMPT), device="cuda", generator=g)
        serve_turn(model, sessions, sid, prompt_ids)


def main():
    name = "depth_kv_cache"
    out = C.outdir_from_argv(name)
    model, _ = _hf.llama(VOCAB, HIDDEN, LAYERS, heads=HEADS, kv_heads=KV_HEADS, intermediate=2816, use_cache=True)
    model.eval()
    sessions = {}
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    per_step = []
    for step in range(1, STEPS + 1):
        with torch.no_grad():
            server_step(model, sessions, step)
        torch.cuda.synchronize()
        kv = sum(_hf.cache_bytes(c) for c in sessions.values())
        a = torch.cuda.memory_allocated()
        per_step.append({"step": step, "memory_allocated": a, "memory_reserved": torch.cuda.memory_reserved(),
                         "above_base": a - base, "cache_bytes": kv,
                         "cache_tokens_per_session": _hf.cache_tokens(next(iter(sessions.values())))})
        print(f"[{name}] step {step}: {per_step[-1]}", flush=True)
        if step in DUMP_STEPS:
            C.dump(C.step_snapshot_path(out, step, TAG), name,
                   extra={"recording": REC, "step": step, "tag": TAG, "base_allocated_bytes": base,
                          "cache_bytes": kv, "sessions": len(sessions)})

    from transformers import cache_utils

    here = os.path.abspath(__file__)
    head_dim = HIDDEN // HEADS
    per_token = LAYERS * 2 * KV_HEADS * head_dim * 2
    update = getattr(getattr(cache_utils, "DynamicLayer", None), "update", None) or cache_utils.DynamicCache.update
    cache_growth = [b["cache_bytes"] - a["cache_bytes"] for a, b in zip(per_step, per_step[1:])]
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "leak",
        "named_cause": "kv_cache",
        "culprit_functions": ["serve_turn"],
        "callsite": {"function": "serve_turn", "file": os.path.basename(here),
                     "line": _hf.line_of(here, "out = model(input_ids=prompt_ids")},
        "callsite_decode_line": _hf.line_of(here, "out = model(input_ids=token"),
        "origin": _hf.source_line(update, "torch.cat"),
        "retained_by": "sessions dict in main: every session's DynamicCache is kept, never evicted",
        "leak_bytes_per_step": SESSIONS * (PROMPT + DECODE) * per_token,
        "kv_bytes_per_token": per_token,
        "tokens_per_step": SESSIONS * (PROMPT + DECODE),
        "measured_cache_growth_per_step": cache_growth,
        "sessions": SESSIONS,
        "steps": STEPS,
        "dump_steps": list(DUMP_STEPS),
        "snapshot_layout": f"step<N>/{TAG}_rank0_pid<PID>.pickle",
        "base_allocated_bytes": base,
        "per_step": per_step,
        "model": _hf.describe(model),
    })


if __name__ == "__main__":
    main()
