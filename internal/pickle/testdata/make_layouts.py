"""Writes layouts.pickle.gz: 6,000 trace-entry-like dicts (protocol 4, 344 kB:
more than the decoder's read buffer) whose byte layouts change from one to
the next, for shape.go's reads (shape_test.go checks them against the
generic path). The sizes take
BININT1, BININT2, BININT and LONG1 of two lengths, the addresses and streams
LONG1 of other lengths now and then, the frames lists are fresh, empty, or
read from the memo, and some compile contexts are longer than a shape keeps
a string: more layouts than a template keeps shapes, in runs and at random.

    python3 internal/pickle/testdata/make_layouts.py
"""
import gzip
import os
import pickle
import random

rng = random.Random(15)
frame = {"name": "f", "filename": "/a.py", "line": 3}
stack = [frame, {"name": "g", "filename": "/a.py", "line": 9}]
shared = [frame]
sizes = [0, 100, 5000, 70000, 2**31 + 5, 2**40]


def entry(i, layout):
    return {
        "action": ["alloc", "free_requested", "free_completed"][i % 3],
        "addr": (1 << 33) + 512 * i if layout % 11 == 0 else 140000000000000 + 512 * i,
        "size": sizes[layout % len(sizes)],
        "stream": 2**40 if layout % 13 == 0 else i % 2,
        "time_us": 1795270260291544 + i,
        "compile_context": "torch/_dynamo/eval_frame.py" if layout % 17 == 0 else "".join(["N", "/A"]),
        "user_metadata": "",
        "frames": [list(stack), shared, [], stack][layout % 4],
    }


entries, layout = [], 0
for i in range(6000):
    if rng.random() < 0.3:  # runs of a layout, and changes at random
        layout = rng.randrange(60)
    entries.append(entry(i, layout))
here = os.path.dirname(os.path.abspath(__file__))
with gzip.GzipFile(os.path.join(here, "layouts.pickle.gz"), "wb", mtime=0) as f:
    f.write(pickle.dumps(entries, protocol=4))
