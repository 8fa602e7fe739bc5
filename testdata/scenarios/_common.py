"""Shared helpers for the vramscope GPU scenario scripts.

Every scenario script imports this module *before* touching CUDA, calls
start_recording() first thing, and uses dump() to write a snapshot pickle plus a
sidecar JSON (<file>.json) holding torch's own numbers at dump time.
"""
import json
import os
import sys
import time

import torch

MiB = 1 << 20
GiB = 1 << 30

# memory_stats() keys copied verbatim (same spelling as torch) into every sidecar.
STAT_KEYS = [
    "allocated_bytes.all.current",
    "reserved_bytes.all.current",
    "active_bytes.all.current",
    "requested_bytes.all.current",
    "allocated_bytes.all.peak",
    "reserved_bytes.all.peak",
    "active_bytes.all.peak",
    "requested_bytes.all.peak",
    "inactive_split_bytes.all.current",
    "segment.all.current",
    "allocation.all.current",
    "allocation.all.allocated",
    "num_alloc_retries",
    "num_ooms",
    "num_device_alloc",
    "num_device_free",
]


def start_recording(max_entries=100_000, stacks="python", context="all"):
    """Start allocator history recording. Call before any CUDA allocation."""
    torch.cuda.memory._record_memory_history(
        enabled="all", context=context, stacks=stacks, max_entries=max_entries
    )
    return {"max_entries": max_entries, "stacks": stacks, "context": context}


def torch_numbers(extra=None):
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    d = {k: int(stats.get(k, 0)) for k in STAT_KEYS}
    d["max_memory_allocated"] = int(torch.cuda.max_memory_allocated())
    d["max_memory_reserved"] = int(torch.cuda.max_memory_reserved())
    d["memory_allocated"] = int(torch.cuda.memory_allocated())
    d["memory_reserved"] = int(torch.cuda.memory_reserved())
    d["pid"] = os.getpid()
    d["rank"] = int(os.environ.get("RANK", "0") or 0)
    d["torch_version"] = torch.__version__
    d["cuda_version"] = torch.version.cuda
    d["device_name"] = torch.cuda.get_device_name(0)
    d["device_total_memory"] = int(torch.cuda.get_device_properties(0).total_memory)
    d["python_version"] = sys.version.split()[0]
    d["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    d["time_unix"] = time.time()
    d["memory_stats"] = {k: (v if isinstance(v, (int, float)) else str(v)) for k, v in stats.items()}
    if extra:
        d.update(extra)
    return d


def dump(path, scenario, extra=None):
    """Take torch's numbers, then _dump_snapshot(path), then write path + '.json'."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    nums = torch_numbers(extra)
    nums["scenario"] = scenario
    nums["file"] = os.path.basename(path)
    nums["note"] = "numbers read immediately before torch.cuda.memory._dump_snapshot"
    t0 = time.time()
    torch.cuda.memory._dump_snapshot(path)
    nums["dump_seconds"] = round(time.time() - t0, 3)
    nums["pickle_bytes"] = os.path.getsize(path)
    with open(path + ".json", "w") as f:
        json.dump(nums, f, indent=2, sort_keys=True)
    print(
        f"[{scenario}] dumped {path}: alloc={nums['allocated_bytes.all.current']} "
        f"reserved={nums['reserved_bytes.all.current']} "
        f"max_alloc={nums['max_memory_allocated']} max_res={nums['max_memory_reserved']} "
        f"retries={nums['num_alloc_retries']} ooms={nums['num_ooms']} "
        f"pickle={nums['pickle_bytes']}B dump={nums['dump_seconds']}s",
        flush=True,
    )
    return nums


def step_snapshot_path(outdir, step, tag, rank=None):
    """verl layout: <outdir>/step<N>/<tag>_rank<R>_pid<P>.pickle"""
    if rank is None:
        rank = int(os.environ.get("RANK", "0") or 0)
    return os.path.join(outdir, f"step{step}", f"{tag}_rank{rank}_pid{os.getpid()}.pickle")


class MemoryLog:
    """Seed-003 (verl/SGLang PR 9071) memory log format:

    timestamp,memory_summary,memory_allocated,memory_reserved
    2025-08-12 10:00:00,"<memory_summary with ',' replaced by ';'>",184.65,235.52

    memory_allocated / memory_reserved in MB (bytes / 1024 / 1024, 2 decimals).
    Unlike the original we do NOT call gc.collect()/empty_cache() before sampling.
    """

    def __init__(self, path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.path = path
        self.f = open(path, "w")
        self.f.write("timestamp,memory_summary,memory_allocated,memory_reserved\n")
        self.f.flush()

    def sample(self):
        summary = torch.cuda.memory_summary(device=0, abbreviated=True)
        a = torch.cuda.memory_allocated() / (1024 * 1024)
        r = torch.cuda.memory_reserved() / (1024 * 1024)
        ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        self.f.write(f"{ts},\"{summary.replace(',', ';')}\",{a:.2f},{r:.2f}\n")
        self.f.flush()
        return a, r

    def close(self):
        self.f.close()


def write_json(path, obj):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)


def outdir_from_argv(default_name):
    """Scripts take the output directory as argv[1] (default ./out/<name>)."""
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        d = sys.argv[1]
    else:
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", default_name)
    os.makedirs(d, exist_ok=True)
    return d
