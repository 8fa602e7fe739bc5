"""Write v2_0.pickle: the smallest file in the layout torch 2.0's
torch.cuda.memory._dump_snapshot() wrote (see README.md).

torch 2.11, on the GPU machine, cannot write this layout, so it is built by
hand, key for key as torch 2.0 wrote it (checked against a public 2.0 file):
blocks carry size, requested_size, state and, when the allocator kept any,
history, newest allocation first; no block carries its address; the
trace holds one entry, trace_alloc_max_entries' default. Run with plain
python3 (stdlib pickle, protocol 4 as Python 3.8-3.13 writes).
"""
import pickle

MiB = 1 << 20
model = {"filename": "/home/u/proj/model.py", "name": "make_weights", "line": 12}
train = {"filename": "/home/u/proj/train.py", "name": "<module>", "line": 30}
torch_fn = {"filename": "/home/u/.venv/lib/python3.10/site-packages/torch/nn/functional.py", "name": "linear", "line": 114}
old = {"filename": "/home/u/proj/model.py", "name": "scratch", "line": 40}

large = 0x7F5FC0000000
small = 0x7F5FC2000000
segments = [
    {
        "device": 0, "address": large, "total_size": 20 * MiB,
        "allocated_size": 8 * MiB, "active_size": 8 * MiB, "requested_size": 8 * MiB - 600,
        "stream": 0, "segment_type": "large",
        "blocks": [
            # Active: history[0] is the allocation that holds it; the older
            # entry (a freed tensor further in, kept by trimHistoryBefore)
            # is not.
            {"size": 8 * MiB, "requested_size": 8 * MiB - 600, "state": "active_allocated",
             "history": [
                 {"addr": large, "real_size": 8 * MiB - 600, "frames": [model, train]},
                 {"addr": large + 4 * MiB, "real_size": 2 * MiB, "frames": [old, train]},
             ]},
            # Inactive: its history is of tensors that are gone.
            {"size": 12 * MiB, "requested_size": 2 * MiB, "state": "inactive",
             "history": [{"addr": large + 8 * MiB, "real_size": 2 * MiB, "frames": [old, train]}]},
        ],
    },
    {
        "device": 0, "address": small, "total_size": 2 * MiB,
        "allocated_size": 1536, "active_size": 1536, "requested_size": 1096,
        "stream": 0, "segment_type": "small",
        "blocks": [
            {"size": 512, "requested_size": 96, "state": "active_allocated",
             "history": [{"addr": small, "real_size": 96, "frames": [torch_fn, model, train]}]},
            # Allocated before recording started: no history.
            {"size": 1024, "requested_size": 1000, "state": "active_allocated"},
            {"size": 2 * MiB - 1536, "requested_size": 0, "state": "inactive"},
        ],
    },
]
traces = [[{"action": "snapshot", "addr": 0, "size": 8 * MiB + 1536, "stream": 0}]]
with open("v2_0.pickle", "wb") as f:
    pickle.dump({"segments": segments, "device_traces": traces}, f, protocol=4)
