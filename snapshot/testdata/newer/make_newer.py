"""Add the keys torch added after 2.11 (shared/research/pytorch-snapshot.md
sections 1.2-1.5 and 1.9) to the real 2.11 fixture format/default.pickle."""
import pickle
import sys

d = pickle.load(open(sys.argv[1], "rb"))
d["trace_alloc_max_entries"] = [100000]
d["trace_alloc_overflowed"] = [False]
d["host_segments"] = []
d["host_traces"] = [[]]
t = d["device_traces"][0]
for e in t:
    e["pool_id"] = (0, 0)
    e["internal_metadata"] = ""
alloc = next(e for e in t if e["action"] == "alloc")
t.append({"action": "annotate", "addr": alloc["addr"], "size": 0, "stream": 0,
          "time_us": t[-1]["time_us"] + 1, "compile_context": "N/A",
          "user_metadata": '{"saved_by": "autograd"}', "pool_id": (0, 0),
          "internal_metadata": "", "frames": alloc.get("frames", [])})
for s in d["segments"]:
    for b in s["blocks"]:
        b["user_metadata"] = ""
pickle.dump(d, open("default_newer.pickle", "wb"), protocol=5)
