"""two_gpus: one process using two GPUs (a model split in two stages), with a
per-process cap on cuda:1 only (set_per_process_memory_fraction). The first
stage lives on cuda:0 and holds the most memory; the second stage on cuda:1
runs out of memory in expand_on_stage1 while cuda:0 is fine. One snapshot
holds both devices' segments and traces.

Needs two GPUs. usage: python3 two_gpus.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=100_000, stacks="python")

import torch  # noqa: E402

MiB = C.MiB
GiB = C.GiB


def load_stage0():
    return [torch.empty(512 * MiB, dtype=torch.uint8, device="cuda:0") for _ in range(8)]  # 4 GiB


def load_stage1():
    return [torch.empty(256 * MiB, dtype=torch.uint8, device="cuda:1") for _ in range(4)]  # 1 GiB


def expand_on_stage1(n):
    return torch.empty(n, dtype=torch.uint8, device="cuda:1")


def main():
    name = "two_gpus"
    out = C.outdir_from_argv(name)
    total1 = torch.cuda.get_device_properties(1).total_memory
    cap = 2 * GiB / total1
    torch.cuda.set_per_process_memory_fraction(cap, 1)
    s0 = load_stage0()
    s1 = load_stage1()
    message = ""
    try:
        big = expand_on_stage1(3 * GiB)
    except torch.OutOfMemoryError as e:
        message = str(e)
        print(f"[{name}] OOM on cuda:1: {message}", flush=True)
    with open(os.path.join(out, "oom_message.txt"), "w") as f:
        f.write(message + "\n")
    nums = C.dump(os.path.join(out, f"{name}.pickle"), name, extra={
        "recording": REC, "cap_fraction_cuda1": cap,
        "allocated_cuda0": torch.cuda.memory_allocated(0), "allocated_cuda1": torch.cuda.memory_allocated(1),
        "reserved_cuda0": torch.cuda.memory_reserved(0), "reserved_cuda1": torch.cuda.memory_reserved(1),
        "max_allocated_cuda0": torch.cuda.max_memory_allocated(0), "max_allocated_cuda1": torch.cuda.max_memory_allocated(1),
    })
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "oom",
        "oom_device": 1,
        "culprit_functions": ["expand_on_stage1"],
        "allocated_cuda0": 4 * GiB,
        "allocated_cuda1": 1 * GiB,
        "oom_message": message,
        "note": "per-device figures: cuda:0 peaks at 4 GiB, cuda:1 at 1 GiB; the OOM is on cuda:1",
    })
    del s0, s1


if __name__ == "__main__":
    main()
