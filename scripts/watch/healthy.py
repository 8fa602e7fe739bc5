"""A healthy training loop for scripts/watch-e2e.sh: it must never be called
a leak.

It warms up (its batch grows once, after 20 s: a jump, then a plateau), and
every 15 s allocates a 2 GiB scratch buffer and hands it back to the driver
with torch.cuda.empty_cache(), so NVML sees a saw-tooth.

Usage: python3 healthy.py SECONDS
"""

import sys
import time

import torch

MiB = 1 << 20


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 180
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    start = time.time()
    end = start + seconds
    last_scratch = start
    steps = 0
    while time.time() < end:
        batch = 1024 if time.time() - start < 20 else 8192  # the warm-up jump
        x = torch.randn(batch, 1024, device="cuda")
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if time.time() - last_scratch >= 15:
            scratch = torch.empty(2048 * MiB, dtype=torch.uint8, device="cuda")
            scratch.fill_(1)
            torch.cuda.synchronize()
            time.sleep(3)
            del scratch
            torch.cuda.empty_cache()
            last_scratch = time.time()
        torch.cuda.synchronize()
        steps += 1
        time.sleep(0.25)
    print("healthy: %d steps, reserved %d MiB" % (steps, torch.cuda.memory_reserved() // MiB), flush=True)


if __name__ == "__main__":
    main()
