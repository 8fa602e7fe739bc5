"""peak_optimizer: the peak of a training step is AdamW's foreach update.

torch's default AdamW (foreach=True on CUDA) updates every parameter at once
with _foreach_* ops, which allocate temporaries the size of the parameters on
top of the parameters, their gradients and the optimizer's two states. With a
small batch the step's peak is there, under the user's opt.step() line.

The recorded run uses the default (foreach). After the dump the script runs the
same steps again, from fresh models, with fused=True and with foreach=False, and
records torch's own max_memory_allocated() for each: the fix's true effect.

usage: python3 peak_optimizer.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=100_000, stacks="python")

import torch  # noqa: E402

import _hf  # noqa: E402

WIDTH = 4096
LAYERS = 8
BATCH = 64
STEPS = 3


def build(**opt_kwargs):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **opt_kwargs)
    return model, opt


def train(model, opt):
    for step in range(STEPS):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def peak_of(**opt_kwargs):
    """torch's max_memory_allocated() of the same training with another optimizer setting."""
    model, opt = build(**opt_kwargs)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    train(model, opt)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del model, opt
    torch.cuda.empty_cache()
    return peak


def main():
    name = "peak_optimizer"
    out = C.outdir_from_argv(name)
    model, opt = build()
    train(model, opt)
    here = os.path.abspath(__file__)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    nums = C.dump(os.path.join(out, name + ".pickle"), name, extra={"recording": REC, "parameter_bytes": params})
    del model, opt
    torch.cuda.empty_cache()
    torch.cuda.memory._record_memory_history(enabled=None)
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "healthy",
        "named_cause": "optimizer_foreach",
        "culprit_functions": ["train"],
        "callsite": {"function": "train", "file": os.path.basename(here), "line": _hf.line_of(here, "opt.step()")},
        "parameter_bytes": params,
        "peak_allocated_foreach": nums["max_memory_allocated"],
        "peak_allocated_fused": peak_of(fused=True),
        "peak_allocated_no_foreach": peak_of(foreach=False),
        "steps": STEPS,
    })


if __name__ == "__main__":
    main()
