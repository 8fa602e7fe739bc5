"""forward_deep: ONE grad-enabled forward pass of a 32-layer GPT-style model
(the shape of the public cs336 "forward" snapshots), dumped right after the
forward with the logits and the autograd graph alive. Allocated memory climbs
block by block because autograd keeps every block's activations for the
backward that has not run yet. That is one pass: no steps, no leak.

As in the public benchmark scripts that made such snapshots, recording starts
late: after the model is built and one warm-up forward and backward ran, so
the trace holds the measured forward pass alone.

With MIXED=1 (forward_deep_mixed) the same pass runs 48 layers under bf16
autocast.

usage: python3 forward_deep.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

import torch  # noqa: E402

import _deep  # noqa: E402

MIXED = os.environ.get("MIXED") == "1"
LAYERS = 48 if MIXED else 32


def forward_pass(model, tokens):
    if MIXED:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return model(tokens)
    return model(tokens)


def main():
    name = "forward_deep_mixed" if MIXED else "forward_deep"
    out = C.outdir_from_argv(name)
    model = _deep.build(LAYERS)
    tokens, _ = _deep.batch(0)
    forward_pass(model, tokens).float().mean().backward()  # warm-up, not recorded
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    rec = C.start_recording(max_entries=400_000, stacks="python")
    before = torch.cuda.memory_allocated()
    logits = forward_pass(model, tokens)
    torch.cuda.synchronize()
    after = torch.cuda.memory_allocated()
    print(f"[{name}] layers={LAYERS} allocated before forward {before}, after {after}", flush=True)
    nums = C.dump(os.path.join(out, f"{name}.pickle"), name,
                  extra={"recording": rec, "recording_started": "after model build and one warm-up step", "layers": LAYERS, "mixed": MIXED})
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "healthy",
        "culprit_functions": [],
        "steps": 0,
        "layers": LAYERS,
        "leak_bytes_per_step": 0,
        "allocated_before_forward": before,
        "allocated_after_forward": after,
        "activations_kept_for_backward": after - before,
        "max_memory_allocated": nums["max_memory_allocated"],
        "note": "one forward pass with grad enabled, dumped before backward: memory grows layer by layer "
                "because autograd saves activations; this is one pass, not steps, and not a leak",
    })
    del logits


if __name__ == "__main__":
    main()
