"""depth_loss_upcast: a Llama-style training step whose peak is the loss.

A 4-layer LlamaForCausalLM (random weights, bf16) with a 128256-token vocabulary
is trained for 3 steps with AdamW on 4 x 2048 tokens; the model computes its own
loss (labels=...). transformers' ForCausalLMLoss upcasts the bf16 logits with
logits.float() (transformers/loss/loss_utils.py) and cross_entropy's
log_softmax output is fp32 too: 8192 x 128256 x 4 B = 3.91 GiB each. The peak
falls inside loss.backward(), where the autograd engine's thread allocates the
fp32 gradients of log_softmax (two more 3.91 GiB blocks) with an EMPTY Python
stack. AdamW's state is created lazily at the first step: not a leak.

The user's lines are train_step's `out = model(...)` (the callsite of every
forward and loss block) and `loss.backward()` (where the autograd thread's
blocks belong). The library lines are the upcast in ForCausalLMLoss and
cross_entropy in fixed_cross_entropy.

With STACKS=all (depth_loss_upcast_all) the same run records C++ frames too:
the autograd thread's blocks then name their node (LogSoftmaxBackward0, ...).

usage: python3 depth_loss_upcast.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

STACKS = os.environ.get("STACKS", "python")
REC = C.start_recording(max_entries=200_000, stacks=STACKS)

import torch  # noqa: E402

import _hf  # noqa: E402

VOCAB = 128256
HIDDEN = 512
LAYERS = 4
BATCH, SEQ = 4, 2048
STEPS = 3
phases = []


def mark(step, phase):
    """torch's own peak since the last mark: which phase of the step set it."""
    torch.cuda.synchronize()
    phases.append({"step": step, "phase": phase,
                   "peak_allocated": torch.cuda.max_memory_allocated(),
                   "allocated_after": torch.cuda.memory_allocated()})
    torch.cuda.reset_peak_memory_stats()


def make_batch(step):
    g = torch.Generator(device="cuda").manual_seed(100 + step)
    input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda", generator=g)
    return input_ids, input_ids.clone()


def train_step(model, opt, step, input_ids, labels):
    out = model(input_ids=input_ids, labels=labels)
    mark(step, "forward_and_loss")
    loss = out.loss
    loss.backward()
    mark(step, "backward")
    opt.step()
    opt.zero_grad(set_to_none=True)
    mark(step, "optimizer")
    return float(loss)


def main():
    name = "depth_loss_upcast_all" if STACKS == "all" else "depth_loss_upcast"
    out = C.outdir_from_argv(name)
    model, _ = _hf.llama(VOCAB, HIDDEN, LAYERS, heads=8, kv_heads=8, intermediate=1408, use_cache=False)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    mark(0, "setup")
    losses = []
    for step in range(1, STEPS + 1):
        input_ids, labels = make_batch(step)
        losses.append(train_step(model, opt, step, input_ids, labels))
        print(f"[{name}] step {step}: loss={losses[-1]:.4f} {phases[-3:]}", flush=True)
    peak = max(phases, key=lambda p: p["peak_allocated"])
    nums = C.dump(os.path.join(out, f"{name}.pickle"), name,
                  extra={"recording": REC, "steps": STEPS, "phases": phases})

    try:
        from transformers.loss import loss_utils
    except ImportError:  # releases before the loss package: no origin line to give
        loss_utils = None

    here = os.path.abspath(__file__)
    tokens = BATCH * SEQ
    fp32_logits = tokens * VOCAB * 4
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "peak",
        "named_cause": "dtype_upcast",
        "culprit_functions": ["ForCausalLMLoss", "fixed_cross_entropy"],
        "callsite": {"function": "train_step", "file": os.path.basename(here),
                     "line": _hf.line_of(here, "out = model(input_ids=input_ids, labels=labels)")},
        "backward_call": {"function": "train_step", "file": os.path.basename(here),
                          "line": _hf.line_of(here, "loss.backward()")},
        "origin_upcast": _hf.source_line(getattr(loss_utils, "ForCausalLMLoss", None), ".float()"),
        "origin_cross_entropy": _hf.source_line(getattr(loss_utils, "fixed_cross_entropy", None), "cross_entropy("),
        "tokens": tokens,
        "vocab": VOCAB,
        "bf16_logits_bytes": tokens * VOCAB * 2,
        "fp32_logits_bytes": fp32_logits,
        "peak_phase": peak["phase"],
        "peak_step": peak["step"],
        "peak_allocated": peak["peak_allocated"],
        "phases": phases,
        "note": ("peak_allocated per phase is torch.cuda.max_memory_allocated() since the previous mark; "
                 "the backward peak holds the bf16 logits, the fp32 log_softmax output saved for backward, "
                 "and the autograd thread's fp32 gradients of log_softmax (empty Python stack), each fp32 block "
                 "fp32_logits_bytes"),
        "optimizer_state": "AdamW exp_avg/exp_avg_sq created lazily in step 1's opt.step(): not a leak",
        "stacks": STACKS,
        "losses": losses,
        "model": _hf.describe(model),
        "max_memory_allocated": nums["max_memory_allocated"],
    })


if __name__ == "__main__":
    main()
