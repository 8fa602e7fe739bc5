#!/usr/bin/env python3
"""What the memo reads of each tail of a split decode refer to.

A split decode (snapshot/split.go) cuts a snapshot's pickle into parts; the
tail of part k starts at its first batch of a list (a MARK right after an
APPENDS) and reads memo entries by id (BINGET, LONG_BINGET). Today walkers
walk every part before it, so that each tail knows its base (how many memo
entries precede it) and the strings those entries hold. A tail that starts
without that walk would have to defer every read of an entry before its base
and have the head resolve it at the merge: containers (frame dicts, frame
lists) defer as placeholders already, but a string a tail must read to go on
(a dict key, an action, a frame's file name) would have to come from a memo
prefix decoded first, and, not knowing its base, would have to defer its
reads of its own entries too, unless they are strings. This counts, per
tail, its memo reads by where their entry lies (the tail's own; before its
base and in the first PREFIX of the file, or after it) and what it holds (a
str or not), so that the cost of such a design can be judged on real
snapshots before it is built.

    python3 bench/memo_refs.py [--parts 16] [--prefix 0.02] FILE...

FILE: a raw, .gz or .zst pickle (zstd needs the zstandard module). Nothing
in the input is executed: it is read with pickletools.genops.
"""
import argparse
import gzip
import io
import pickletools
import sys

STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING"}
GETS = {"BINGET", "LONG_BINGET", "GET"}


def load(path):
    if path.endswith(".gz"):
        return gzip.open(path).read()
    if path.endswith(".zst"):
        import zstandard  # only for .zst inputs

        return zstandard.ZstdDecompressor().stream_reader(open(path, "rb")).read()
    return open(path, "rb").read()


def refs(data, parts, prefix):
    """Returns one row per tail: its start and counts of its memo reads."""
    size = len(data)
    cuts = [size * k // parts for k in range(1, parts)]
    prefix_at = size * prefix
    kinds = []  # per memo id: True if it holds a str
    prefix_len = None
    prev = None  # the last opcode's name, MEMOIZE and FRAME aside
    tails = []  # [start offset, base]
    rows = []
    cut = 0
    for op, arg, pos in pickletools.genops(io.BytesIO(data)):
        name = op.name
        if prefix_len is None and pos >= prefix_at:
            prefix_len = len(kinds)
        if name == "MARK" and prev == "APPENDS" and cut < len(cuts) and pos >= cuts[cut]:
            while cut < len(cuts) and pos >= cuts[cut]:
                cut += 1
            tails.append((pos, len(kinds)))
            rows.append({"start": pos, "base": len(kinds), "reads": 0, "own": 0, "own_str": 0,
                         "prefix_str": 0, "prefix_other": 0, "mid_str": 0, "mid_other": 0,
                         "mid_str_ids": set()})
        if name == "MEMOIZE":
            kinds.append(prev in STRINGS)
            continue
        if name in ("BINPUT", "LONG_BINPUT", "PUT"):
            while len(kinds) <= arg:
                kinds.append(False)
            kinds[arg] = prev in STRINGS
            continue
        if name == "FRAME":
            continue
        if name in GETS and rows:
            r = rows[-1]
            r["reads"] += 1
            is_str = arg < len(kinds) and kinds[arg]
            if arg >= r["base"]:
                r["own"] += 1
                r["own_str"] += is_str
            else:
                where = "prefix" if prefix_len is not None and arg < prefix_len else "mid"
                r[f"{where}_{'str' if is_str else 'other'}"] += 1
                if where == "mid" and is_str:
                    r["mid_str_ids"].add(arg)
        prev = name
    return size, prefix_len, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--parts", type=int, default=16)
    ap.add_argument("--prefix", type=float, default=0.02, help="the prefix, as a fraction of the file")
    a = ap.parse_args()
    for path in a.files:
        size, prefix_len, rows = refs(load(path), a.parts, a.prefix)
        print(f"\n{path}: {size} bytes raw, {a.parts} parts, prefix {a.prefix:.0%} = {prefix_len} memo entries")
        print("| tail | start | base | memo reads | own: all (str) | before base, in the prefix: str / other | after the prefix: str (distinct) / other |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for k, r in enumerate(rows, 1):
            print(f"| {k} | {r['start']} | {r['base']} | {r['reads']} | {r['own']} ({r['own_str']}) | {r['prefix_str']} / {r['prefix_other']}"
                  f" | {r['mid_str']} ({len(r['mid_str_ids'])}) / {r['mid_other']} |")


if __name__ == "__main__":
    sys.exit(main())
