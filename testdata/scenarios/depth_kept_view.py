"""depth_kept_view: an evaluation loop under torch.no_grad() that keeps
out.logits[:, -1] of every batch: a small view keeping a large base alive.

The same 4-layer LlamaForCausalLM as depth_eval_graph (random weights, bf16),
evaluated under torch.no_grad() on one 8 x 512 batch per step. evaluate() keeps
`out.logits[:, -1]` for a later metric: an 8 x 32000 view (512000 B) whose
base is the whole bf16 logits tensor (262144000 B). No autograd graph is kept
(no_grad), so the leak is the logits alone: one block per step, from the LM
head's line in transformers' modeling_llama.py, under evaluate's model call.

After the last dump the script measures, from torch's own numbers, what one
step keeps with the view (the base) and with .clone() (the view's own bytes).

Snapshots at the end of steps 2, 3, 4: OUTDIR/step<N>/eval_rank0_pid<PID>.pickle

usage: python3 depth_kept_view.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=200_000, stacks="python")

import torch  # noqa: E402

import _hf  # noqa: E402

VOCAB = 32000
HIDDEN = 512
LAYERS = 4
BATCH, SEQ = 8, 512
STEPS = 5
DUMP_STEPS = (2, 3, 4)
TAG = "eval"
last_logits = []


def make_batch(step):
    g = torch.Generator(device="cuda").manual_seed(700 + step)
    return torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda", generator=g)


@torch.no_grad()
def evaluate(model, input_ids):
    out = model(input_ids=input_ids, use_cache=False)
    last_logits.append(out.logits[:, -1])  # a view: keeps the whole logits tensor
    return out.logits.shape


@torch.no_grad()
def kept_by_one_step(model, step, keep):
    """Bytes one more evaluate-like step leaves allocated when its result is kept by keep()."""
    held = []
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    out = model(input_ids=make_batch(step), use_cache=False)
    held.append(keep(out.logits))
    del out
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - before
    held.clear()
    return kept


def main():
    name = "depth_kept_view"
    out = C.outdir_from_argv(name)
    model, _ = _hf.llama(VOCAB, HIDDEN, LAYERS, heads=8, kv_heads=8, intermediate=1408, use_cache=False)
    model.eval()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    per_step = []
    for step in range(1, STEPS + 1):
        evaluate(model, make_batch(step))
        torch.cuda.synchronize()
        a = torch.cuda.memory_allocated()
        per_step.append({"step": step, "memory_allocated": a, "memory_reserved": torch.cuda.memory_reserved(),
                         "above_base": a - base, "kept_views": len(last_logits)})
        print(f"[{name}] step {step}: {per_step[-1]}", flush=True)
        if step in DUMP_STEPS:
            C.dump(C.step_snapshot_path(out, step, TAG), name,
                   extra={"recording": REC, "step": step, "tag": TAG, "base_allocated_bytes": base})

    with_view = kept_by_one_step(model, 90, lambda logits: logits[:, -1])
    with_clone = kept_by_one_step(model, 91, lambda logits: logits[:, -1].clone())

    try:
        from transformers.models.llama import modeling_llama
    except ImportError:
        modeling_llama = None

    here = os.path.abspath(__file__)
    growth = [b["memory_allocated"] - a["memory_allocated"] for a, b in zip(per_step, per_step[1:])]
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "leak",
        "named_cause": "kept_output",
        "culprit_functions": ["evaluate"],
        "callsite": {"function": "evaluate", "file": os.path.basename(here),
                     "line": _hf.line_of(here, "out = model(input_ids=input_ids")},
        "keep_line": _hf.line_of(here, "last_logits.append(out.logits[:, -1])"),
        "origin_logits": _hf.source_line(getattr(getattr(modeling_llama, "LlamaForCausalLM", None), "forward", None), "self.lm_head("),
        "retained_by": "last_logits list: views of out.logits, computed under no_grad",
        "leak_bytes_per_step": growth[-1] if growth else None,
        "measured_allocated_delta_per_step": growth,
        "logits_bytes": BATCH * SEQ * VOCAB * 2,
        "view_bytes": BATCH * VOCAB * 2,
        "kept_per_step_view": with_view,
        "kept_per_step_clone": with_clone,
        "steps": STEPS,
        "dump_steps": list(DUMP_STEPS),
        "snapshot_layout": f"step<N>/{TAG}_rank0_pid<PID>.pickle",
        "base_allocated_bytes": base,
        "per_step": per_step,
        "model": _hf.describe(model),
    })


if __name__ == "__main__":
    main()
