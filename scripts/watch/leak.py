"""A server loop that leaks GPU memory, for scripts/watch-e2e.sh.

Each step runs a small model and an optimizer step, and keeps the step's
logits in a list that is never drained: 16 MiB more live memory per step,
one step a second. A tensor of 16 MiB gets its own allocator segment, so
NVML sees the process grow by 16 MiB a step (960 MiB a minute).

Usage: python3 leak.py SECONDS
"""

import sys
import time

import torch

MiB = 1 << 20


def build():
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    return model, torch.optim.SGD(model.parameters(), lr=1e-3)


def keep_logits(kept, out):
    # The leak: every step's output (1024 x 1024 float32, 4 MiB), four
    # times over, in a list that is never drained.
    kept.append(out.detach().repeat(4, 1))


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 180
    model, opt = build()
    kept = []
    end = time.time() + seconds
    step = 0
    while time.time() < end:
        x = torch.randn(1024, 1024, device="cuda")
        out = model(x)
        out.square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        keep_logits(kept, out)
        torch.cuda.synchronize()
        step += 1
        time.sleep(1.0)
    print("leak: %d steps, kept %d MiB" % (step, sum(t.numel() * t.element_size() for t in kept) // MiB), flush=True)


if __name__ == "__main__":
    main()
