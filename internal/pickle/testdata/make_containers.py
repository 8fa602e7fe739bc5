"""Writes containers.json: container shapes that test the VM's whole-container
path (whole.go) against CPython's pickler, for protocols 0-5.

Each case is a value whose containers end in a way the fast path must (or
must not) take as complete: batches of 1,000 items followed by a single
APPEND or SETITEM, a container appended right after a list's APPENDS, empty
containers as values, containers followed by memo reads, shared references
to finished containers, and trace-entry-like dicts spread over FRAMEs.

    python3 internal/pickle/testdata/make_containers.py
"""
import json
import os
import pickle


def shape(v):
    """The JSON shape decoder_test.go's treeSink builds."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, float):
        return {"float": v}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    if isinstance(v, tuple):
        return {"tuple": [shape(x) for x in v]}
    if isinstance(v, list):
        return [shape(x) for x in v]
    if isinstance(v, dict):
        return {"dict": [[shape(k), shape(x)] for k, x in v.items()]}
    raise TypeError(type(v))


def varied_entries():
    """600 entries whose keys, value kinds and frames lists vary, then two
    of them again (read through the memo). Protocols 4 and 5 only: entry
    runs where the pickler writes MEMOIZE."""
    shared = "".join(["N", "/A"])  # one str object: memoized at entry 5, then read back
    def entry(i):
        e = {"action": "alloc" if i % 2 else "free_requested", "addr": 140000000000000 + 512 * i,
             "size": [512 * i, -5, 2**40, -(2**62), 70000][i % 5],
             "stream": i % 3, "time_us": 1795270260291544 + i,
             "compile_context": shared if i >= 5 and i % 4 == 1 else "N/A", "user_metadata": "",
             "frames": [stack, [frame], [], list(stack), [frame, stack[1]]][i % 5]}
        if i == 9:
            e["frames"] = [frame] * 1001  # two batches: APPENDS, then APPEND
        if i % 7 == 0:
            del e["stream"]
        if i % 11 == 0:
            e["extra"] = 1.5
        if i % 13 == 0:
            e["nested"] = {"a": 1}
        if i % 17 == 0:
            e["flag"] = True
        return e
    entries = [entry(i) for i in range(600)]
    # Frames lists and dicts made in dicts that entry reads, read again.
    entries[100]["frames"], entries[101]["frames"] = entries[3]["frames"], entries[4]["frames"]
    return entries + [entries[3], entries[4]]


def annotations():
    """600 dicts as torch writes external_annotations: the keys "stage" and
    "name" and both values are new str objects in each (pickled anew and
    memoized every time), "device" and "time_us" the same object throughout
    (memo reads after the first), then one of the dicts, a value and a key
    read again. Protocols 4 and 5 only, as entries_varied."""
    def key(s):
        return "".join([s[:1], s[1:]])  # a new str object
    anns = [{key("stage"): key(["START", "END"][i % 2]), key("name"): "step#%d" % (i // 2),
             "device": 0, "time_us": 1795270260291544 + i} for i in range(600)]
    # Read again through the memo: numbered as a reader that memoized
    # every key and value of the dicts before.
    return anns + [anns[300], anns[599]["name"], list(anns[598])[1]]


frame = {"name": "f", "filename": "/a.py", "line": 3}
stack = [frame, {"name": "g", "filename": "/a.py", "line": 9}]
values = {
    # 1,001 items: a batch of 1,000, then one APPEND / SETITEM.
    "list1001": list(range(1001)),
    "list1001_dicts": [{"i": i} for i in range(1001)],
    "list1001_lists": [[i] for i in range(1000)] + [[]],
    "dict1001": {str(i): i for i in range(1001)},
    "dict1001_lists": {str(i): [i] for i in range(1001)},
    # A list of lists: each inner list is followed by the next one.
    "lists_of_lists": [[1, 2], [3], [], [[4], []], [5, 6]],
    # Empty containers as values and as items.
    "empties": {"frames": [], "d": {}, "l": [[], {}, []], "t": ()},
    # Finished containers read again through the memo.
    "shared_frames": [{"frames": stack, "a": 1}, {"frames": stack, "a": 2}, stack, frame],
    # Trace-entry-like dicts, enough to cross a 64 KiB FRAME.
    "entries": [{"action": "alloc", "addr": 140000000000000 + 512 * i, "size": 512 * (i % 7),
                 "stream": 0, "time_us": 1795270260291544 + i, "compile_context": "N/A",
                 "user_metadata": "", "frames": stack if i % 3 else []} for i in range(800)],
    # A dict whose last value is a list followed by more keys.
    "list_not_last": {"frames": [frame, frame], "size": 5, "more": [1]},
    # Trace-entry-like dicts of changing shapes, which decoder.go's entry
    # reads by template, learns anew, or leaves to fast().
    "entries_varied": varied_entries(),
    # Annotation-like dicts whose keys are written anew in each.
    "annotations": annotations(),
}

cases = []
for name, v in values.items():
    for proto in range(4 if name in ("entries_varied", "annotations") else 0, pickle.HIGHEST_PROTOCOL + 1):
        cases.append({"name": name, "protocol": proto, "hex": pickle.dumps(v, protocol=proto).hex()})
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "containers.json")
with open(out, "w") as f:
    json.dump({"cases": cases, "want": {k: shape(v) for k, v in values.items()}}, f)
