"""A serving loop with no optimizer: batches of requests through a model
under torch.no_grad for --seconds, as an inference server would. Healthy.
Stopped early by SIGINT (KeyboardInterrupt), it finishes the batch and
exits with status 130."""
import argparse
import sys
import time

import torch

import _e2e as E


def load_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda().half()


@torch.no_grad()
def handle_batch(model, n):
    x = torch.randn(n, 1024, device="cuda", dtype=torch.half)
    return model(x).float().sum().item()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=12)
    a = p.parse_args()
    model = load_model()
    end = time.time() + a.seconds
    served = 0
    try:
        while time.time() < end:
            handle_batch(model, 64 + 64 * (served % 4))
            torch.cuda.synchronize()
            served += 1
            time.sleep(0.05)          # idle between requests
    except KeyboardInterrupt:
        E.log(f"[server] interrupted after {served} batches")
        sys.exit(130)
    E.log(f"[server] served {served} batches")


if __name__ == "__main__":
    main()
