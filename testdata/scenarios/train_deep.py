"""train_deep: five training iterations (forward, cross-entropy, backward,
AdamW step, zero_grad) of a 12-layer GPT-style model, with NO step
annotations and one dump at the end: the iterations can only be found from
the repeating pattern, and each iteration contains 12 repeats of the block.
Healthy: AdamW's state is created once, at the first step.

With LEAK=1 (train_deep_leak) each iteration also keeps `logits[:, -1]` in a
list for logging: the small view keeps the whole logits tensor alive, a
steady leak of one logits tensor per iteration in keep_last_logits.

usage: python3 train_deep.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=400_000, stacks="python")

import torch  # noqa: E402

import _deep  # noqa: E402

LEAK = os.environ.get("LEAK") == "1"
LAYERS = 12
ITERATIONS = 5
kept = []


def keep_last_logits(logits):
    kept.append(logits[:, -1])  # a view: keeps the whole logits tensor alive


def train_iteration(model, opt, step):
    tokens, targets = _deep.batch(step)
    logits = model(tokens)
    loss = _deep.loss_fn(logits, targets)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if LEAK:
        keep_last_logits(logits.detach())
    return float(loss)


def main():
    name = "train_deep_leak" if LEAK else "train_deep"
    out = C.outdir_from_argv(name)
    model = _deep.build(LAYERS)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    per_step = []
    for step in range(1, ITERATIONS + 1):
        lv = train_iteration(model, opt, step)
        torch.cuda.synchronize()
        per_step.append({"step": step, "loss": lv, "memory_allocated": torch.cuda.memory_allocated(),
                         "memory_reserved": torch.cuda.memory_reserved()})
        print(f"[{name}] iteration {step}: {per_step[-1]}", flush=True)
    nums = C.dump(os.path.join(out, f"{name}.pickle"), name,
                  extra={"recording": REC, "layers": LAYERS, "iterations": ITERATIONS})
    logits_bytes = 8 * 511 * 32000 * 4
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "leak" if LEAK else "healthy",
        "culprit_functions": ["forward"] if LEAK else [],
        "leak_site_note": "the leaked logits are allocated by the LM head, forward (_deep.py:56: self.head(...)) called from train_iteration; keep_last_logits (train_deep.py) keeps a view of them, which no allocation stack shows" if LEAK else "",
        "iterations": ITERATIONS,
        "layers": LAYERS,
        "leak_bytes_per_step": logits_bytes if LEAK else 0,
        "logits_bytes": logits_bytes,
        "per_step": per_step,
        "max_memory_allocated": nums["max_memory_allocated"],
    })


if __name__ == "__main__":
    main()
