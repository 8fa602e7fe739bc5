"""Shared by the gpu-e2e programs: arguments, step timing, output to stderr.

The programs know nothing of vramscope: `vramscope record` injects the hook.
They print to stderr only, so that record's standard output is its analysis.
"""
import argparse
import json
import statistics
import sys
import time

import torch

MiB = 1 << 20


def args(description, steps=8):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=steps, help="training steps")
    p.add_argument("--timing", help="write step times (JSON) here")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the timing")
    return p.parse_args()


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class StepTimer:
    """Wall time of each step, synchronized, for the overhead numbers."""

    def __init__(self, a):
        self.a = a
        self.times = []
        self.t = None

    def __enter__(self):
        torch.cuda.synchronize()
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.times.append(time.perf_counter() - self.t)

    def write(self, **extra):
        if not self.a.timing:
            return
        t = self.times[self.a.warmup:] or self.times
        d = {"steps": len(t), "median_ms": statistics.median(t) * 1e3,
             "mean_ms": statistics.fmean(t) * 1e3, "min_ms": min(t) * 1e3,
             "all_ms": [round(x * 1e3, 3) for x in self.times],
             "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
        d.update(extra)
        with open(self.a.timing, "w") as f:
            json.dump(d, f, indent=1)
