"""backward_all: two training iterations of a 4-layer GPT-style model recorded
with stacks="all" (C++ and Python frames). Allocations made during
loss.backward() run on the autograd engine's thread: their stacks hold only
C++ frames, starting with the unwinder's own (torch::unwind::unwind) and
naming the autograd node, e.g. DivBackward0 for the attention's scaling.

usage: python3 backward_all.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=60_000, stacks="all")

import torch  # noqa: E402

import _deep  # noqa: E402


def main():
    name = "backward_all"
    out = C.outdir_from_argv(name)
    model = _deep.build(4, d=256, heads=4, vocab=8000)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(1, 3):
        tokens, targets = _deep.batch(step, n=4, t=256, vocab=8000)
        loss = _deep.loss_fn(model(tokens), targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    nums = C.dump(os.path.join(out, f"{name}.pickle"), name, extra={"recording": REC})
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "healthy",
        "culprit_functions": [],
        "backward_nodes_expected": ["DivBackward0", "MmBackward0", "SoftmaxBackward0"],
        "capture_frames_never_culprit": ["torch::unwind::unwind"],
        "max_memory_allocated": nums["max_memory_allocated"],
    })


if __name__ == "__main__":
    main()
