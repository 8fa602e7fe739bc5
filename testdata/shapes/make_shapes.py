"""Writes the snapshots of shapes that the GPU machine cannot record, or
that no recording is needed for: each the smallest file with the
property, in torch 2.11's layout (shared/research/pytorch-snapshot.md,
sections 1.2-1.5), with the standard library's pickle only.

    python3 make_shapes.py      # in this folder; rewrites the .pickle files

three_gpus.pickle  one process with segments and traces on cuda:0, 1 and 2
                   and an OOM on cuda:1: the layout of public multi-GPU
                   snapshots (one process driving three GPUs), which the
                   one-GPU recordings cannot have. The per-device peaks
                   (1.50, 6.00 and 3.50 GiB) fall at different times; their
                   sum (11.00 GiB) was never allocated on any device.
no_trace.pickle    segments on cuda:0 and no trace (recording was off):
                   no peak can be known.
empty.pickle       no segments and one empty trace: a snapshot taken
                   before anything was allocated.
"""
import pickle

GiB = 1 << 30
MiB = 1 << 20


def frame(name, line):
    return {"name": name, "filename": "/home/user/project/model.py", "line": line}


def stack(name, line):
    # Innermost first, as torch writes them.
    return [frame(name, line), frame("main", 90), {"name": "<module>", "filename": "/home/user/project/train.py", "line": 12}]


def segment(device, address, blocks):
    total = sum(b["size"] for b in blocks)
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    off = address
    for b in blocks:
        b["address"] = off
        off += b["size"]
    return {
        "device": device, "address": address, "total_size": total,
        "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
        "active_size": active, "requested_size": sum(b["requested_size"] for b in blocks if b["state"] != "inactive"),
        "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
        "frames": [], "blocks": blocks,
    }


def block(size, state, frames=()):
    return {"size": size, "requested_size": size if state != "inactive" else 0, "state": state, "frames": list(frames)}


class Trace:
    """One device's events, a millisecond apart from start_us."""

    def __init__(self, start_us):
        self.t = start_us
        self.events = []

    def add(self, action, addr, size, frames=None, **extra):
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": self.t,
             "compile_context": "N/A", "user_metadata": ""}
        e.update(extra)
        if action == "oom":
            e["device_free"] = e.pop("addr")
        if frames is not None:
            e["frames"] = frames
        self.events.append(e)
        self.t += 1000
        return self


def write(name, d):
    with open(name, "wb") as f:
        pickle.dump(d, f, protocol=4)


def cuda0(trace=True):
    seg = 0x7F0000000000
    weights = stack("load_weights", 10)
    s = segment(0, seg, [block(3 * GiB // 2, "active_allocated", weights), block(GiB // 2, "inactive")])
    t = Trace(1_795_000_000_000_000)
    if trace:
        t.add("segment_alloc", seg, 2 * GiB, weights).add("alloc", seg, 3 * GiB // 2, weights)
    return s, t.events


def three_gpus():
    s0, t0 = cuda0()
    # cuda:1: a 4 GiB activation and a 2 GiB temporary fill a 6 GiB
    # segment (the peak); the temporary is freed, then a 3 GiB request
    # fails with 512 MiB free on the GPU.
    seg1 = 0x7F1000000000
    act, tmp, big = stack("forward", 20), stack("attention", 21), stack("project", 22)
    s1 = segment(1, seg1, [block(4 * GiB, "active_allocated", act), block(2 * GiB, "inactive")])
    t1 = (Trace(1_795_000_000_500_000)
          .add("segment_alloc", seg1, 6 * GiB, act)
          .add("alloc", seg1, 4 * GiB, act)
          .add("alloc", seg1 + 4 * GiB, 2 * GiB, tmp)
          .add("free_requested", seg1 + 4 * GiB, 2 * GiB, tmp)
          .add("free_completed", seg1 + 4 * GiB, 2 * GiB, tmp)
          .add("oom", 512 * MiB, 3 * GiB, big)).events
    # cuda:2: a KV cache that stays, the device listed last.
    seg2 = 0x7F2000000000
    kv = stack("cache_kv", 30)
    s2 = segment(2, seg2, [block(7 * GiB // 2, "active_allocated", kv), block(GiB // 2, "inactive")])
    t2 = (Trace(1_795_000_000_200_000)
          .add("segment_alloc", seg2, 4 * GiB, kv)
          .add("alloc", seg2, 7 * GiB // 2, kv)).events
    write("three_gpus.pickle", {"segments": [s0, s1, s2], "device_traces": [t0, t1, t2]})


def no_trace():
    s0, _ = cuda0(trace=False)
    write("no_trace.pickle", {"segments": [s0], "device_traces": [[]]})


def empty():
    write("empty.pickle", {"segments": [], "device_traces": [[]]})


three_gpus()
no_trace()
empty()
