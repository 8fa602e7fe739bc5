#!/usr/bin/env python3
"""Sanity-check a file written by grow_snapshot.py against its seed.

    check_grown.py SEED GROWN [--stacks per-rep|shared]

Loads both (gc disabled), and checks: the grown file loads; entry counts per
device are len(seed) + (k-1) * kept (k and kept re-derived from the seed with
grow_snapshot's own plan); time_us is non-decreasing per device trace and
across annotation repetitions; frame dicts are the seed's objects (unique
frame-dict ids == seed's); frame-list sharing (unique list ids vs references);
`segments` equal the seed's; a replay of the block-level trace never allocates
a live address twice nor frees an unknown one beyond what the seed itself does.
"""
import argparse
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grow_snapshot as gs  # noqa: E402


def replay_errors(trace):
    live = set()
    double_alloc = unknown_free = 0
    seg = set()
    seg_double = seg_unknown = 0
    for e in trace:
        a, addr = e.get("action"), e.get("addr")
        if a == "alloc":
            if addr in live:
                double_alloc += 1
            live.add(addr)
        elif a == "free_completed":
            if addr not in live:
                unknown_free += 1
            live.discard(addr)
        elif a in ("segment_alloc", "segment_map"):
            if addr in seg:
                seg_double += 1
            seg.add(addr)
        elif a in ("segment_free", "segment_unmap"):
            if addr not in seg:
                seg_unknown += 1
            seg.discard(addr)
    return dict(double_alloc=double_alloc, unknown_free=unknown_free,
                seg_double_alloc=seg_double, seg_unknown_free=seg_unknown, live_at_end=len(live))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("seed")
    ap.add_argument("grown")
    args = ap.parse_args()
    gc.disable()
    seed = gs.load_snapshot(args.seed)
    g = gs.Grower(seed)
    grown = gs.load_snapshot(args.grown)
    ok = True

    def check(cond, msg):
        nonlocal ok
        print(("ok   " if cond else "FAIL ") + msg)
        ok = ok and cond

    st, gt = seed["device_traces"], grown["device_traces"]
    check(len(st) == len(gt), "devices: %d" % len(gt))
    kept = [len(p) for p in g.plans]
    k = None
    for d, (s, t) in enumerate(zip(st, gt)):
        if kept[d]:
            kd, rem = divmod(len(t) - len(s), kept[d])
            k = kd + 1
            check(rem == 0, "device %d: %d entries = %d + (k-1)*%d, k=%d" % (d, len(t), len(s), kept[d], k))
        times = [e["time_us"] for e in t]
        check(all(a <= b for a, b in zip(times, times[1:])),
              "device %d: time_us non-decreasing (%d .. %d)" % (d, times[0], times[-1]))
        check(t[:len(s)] == s, "device %d: repetition 0 equals the seed trace" % d)
        rs, rg = replay_errors(s), replay_errors(t)
        check(rg["double_alloc"] == rs["double_alloc"] and rg["unknown_free"] == rs["unknown_free"]
              and rg["seg_double_alloc"] == rs["seg_double_alloc"]
              and rg["seg_unknown_free"] == rs["seg_unknown_free"]
              and rg["live_at_end"] == rs["live_at_end"],
              "device %d: replay seed %s / grown %s" % (d, rs, rg))
    check(grown["segments"] == seed["segments"], "segments equal the seed's")
    ann = grown.get("external_annotations", [])
    sa = seed.get("external_annotations", [])
    check(len(ann) == len(sa) * (k or 1), "annotations: %d = %d * k" % (len(ann), len(sa)))
    lists, refs, fdicts = set(), 0, set()
    for t in gt:
        for e in t:
            fr = e.get("frames")
            if fr is not None:
                lists.add(id(fr))
                refs += 1
                fdicts.update(id(f) for f in fr)
    sfd = set(id(f) for t in st for e in t for f in e.get("frames", ()))
    print("     trace frame lists: %d references, %d unique list objects (%.2f refs/list)"
          % (refs, len(lists), refs / max(len(lists), 1)))
    # frame dicts in the grown trace must be as many as in the seed trace (shared objects)
    check(len(fdicts) == len(sfd), "unique frame dicts in grown trace: %d (seed: %d)" % (len(fdicts), len(sfd)))
    print("RESULT:", "OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
