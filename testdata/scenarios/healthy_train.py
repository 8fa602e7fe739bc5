"""healthy_train: small MLP training loop (forward / backward / Adam step), no
leak. Each step runs inside record_function("train_step#N"); Adam state is
created once (step 1, torch/optim/adam.py _init_group) and then stays constant.

Snapshots at the end of steps 2, 3, 4: OUTDIR/step<N>/trainer_rank0_pid<PID>.pickle
and one snapshot of the whole run: OUTDIR/full_run.pickle (trace from process start).

usage: python3 healthy_train.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=200_000, stacks="python")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

D_IN = 1024
D_HID = 4096
BATCH = 512
STEPS = 6
DUMP_STEPS = (2, 3, 4)
TAG = "trainer"


def build_mlp():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(D_IN, D_HID), nn.GELU(),
        nn.Linear(D_HID, D_HID), nn.GELU(),
        nn.Linear(D_HID, D_IN),
    ).cuda()


def get_batch(step):
    g = torch.Generator(device="cuda").manual_seed(step)
    x = torch.randn(BATCH, D_IN, device="cuda", generator=g)
    y = torch.randn(BATCH, D_IN, device="cuda", generator=g)
    return x, y


def train_step(model, opt, x, y):
    pred = model(x)
    loss = torch.nn.functional.mse_loss(pred, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def main(name="healthy_train"):
    out = C.outdir_from_argv(name)
    model = build_mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    n_params = sum(p.numel() for p in model.parameters())
    per_step = []
    for step in range(1, STEPS + 1):
        with torch.autograd.profiler.record_function(f"train_step#{step}"):
            x, y = get_batch(step)
            loss = train_step(model, opt, x, y)
            lv = float(loss)
            del x, y, loss
        torch.cuda.synchronize()
        a = torch.cuda.memory_allocated()
        per_step.append({"step": step, "loss": lv, "memory_allocated": a,
                         "memory_reserved": torch.cuda.memory_reserved()})
        print(f"[{name}] step {step}: loss={lv:.4f} allocated={a} reserved={torch.cuda.memory_reserved()}", flush=True)
        if step in DUMP_STEPS:
            C.dump(C.step_snapshot_path(out, step, TAG), name,
                   extra={"recording": REC, "step": step, "tag": TAG})
    nums = C.dump(os.path.join(out, "full_run.pickle"), name,
                  extra={"recording": REC, "step": STEPS, "tag": TAG, "full_run": True})
    param_bytes = n_params * 4
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "healthy",
        "culprit_functions": [],
        "steady_state_functions": ["build_mlp", "_init_group"],
        "step_annotation": "train_step#N",
        "n_params": n_params,
        "bytes": {
            "params_fp32": param_bytes,
            "adam_state_fp32": 2 * param_bytes,
            "expected_allocated_between_steps_approx": 3 * param_bytes,
        },
        "leak_bytes_per_step": 0,
        "steps": STEPS,
        "dump_steps": list(DUMP_STEPS),
        "snapshot_layout": f"step<N>/{TAG}_rank0_pid<PID>.pickle plus full_run.pickle",
        "per_step": per_step,
        "max_memory_allocated": nums["max_memory_allocated"],
        "note": "allocated between steps is constant from step 1 on (params + Adam exp_avg/exp_avg_sq, plus Adam's tiny per-param step tensors if on GPU); grads are freed by zero_grad(set_to_none=True)",
    })


if __name__ == "__main__":
    main()
