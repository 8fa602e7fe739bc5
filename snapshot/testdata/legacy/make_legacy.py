"""Rewrite a torch 2.11 snapshot into the 1.x and 2.0 layouts, and into the
list torch.cuda.memory_snapshot() returns (see README.md)."""
import pickle
import sys

src = pickle.load(open(sys.argv[1], "rb"))
CPP = ("", "??")


def py_frames(frames):
    return [f for f in frames if f["filename"] not in CPP and not f["filename"].endswith((".cpp", ".h"))]


def cpp_frames(frames):
    return [f["name"] for f in frames if f not in py_frames(frames)]


def old_segment(s, history):
    seg = {k: s[k] for k in ("device", "address", "total_size", "allocated_size", "active_size", "stream", "segment_type")}
    blocks = []
    for b in s["blocks"]:
        nb = {"size": b["size"], "state": b["state"]}
        if history and b["state"] != "inactive":
            nb["history"] = [{"addr": b["address"], "real_size": b["requested_size"], "frames": py_frames(b["frames"])}]
        blocks.append(nb)
    seg["blocks"] = blocks
    return seg


v113 = [old_segment(s, True) for s in src["segments"]]
v112 = [old_segment(s, False) for s in src["segments"]]
traces = []
for t in src["device_traces"]:
    out = []
    for e in t:
        ne = {k: e[k] for k in ("action", "addr", "device_free", "size", "stream") if k in e}
        if "frames" in e:
            ne["frames"] = py_frames(e["frames"])
            ne["cpp_frames"] = cpp_frames(e["frames"])
        out.append(ne)
    traces.append(out)
v20 = {"segments": v113, "device_traces": traces}
for name, obj in (("v1_13_list", v113), ("v1_12_list", v112), ("v2_0_history", v20)):
    pickle.dump(obj, open(name + ".pickle", "wb"), protocol=2)
# torch.cuda.memory_snapshot() is _snapshot()["segments"]; a user pickles it
# with the interpreter's default protocol.
pickle.dump(src["segments"], open("v2_11_segment_list.pickle", "wb"), protocol=4)
