#!/usr/bin/env python3
"""Grow a real PyTorch CUDA memory snapshot into a big benchmark input.

    grow_snapshot.py SRC OUT [--size-mb 1000] [--stacks per-rep|shared] [--verify]

SRC is a real `torch.cuda.memory._dump_snapshot()` pickle (.pickle, .pickle.gz or
.pickle.zst; zstd is read through the `zstd` CLI when the Python module is missing).
OUT is a snapshot of about --size-mb MB whose device traces are the real traces
repeated k times.  Pure stdlib, no torch needed.

What the grown file looks like
------------------------------
* `segments`, `allocator_settings` are the seed's, unchanged (same objects).
* `device_traces[d]` = repetition 0 (the seed's trace, byte for byte the same
  objects) followed by repetitions 1..k-1 of the seed trace's *balanced part* (see
  below).  Every repetition r shifts `time_us` by r * (span + 1 us), where span is
  max - min of all `time_us` in the seed (trace entries and annotations, all
  devices), so time is strictly increasing across repetitions on every device
  and stays monotonic within a device trace.
* `external_annotations` = the seed's list, then the seed's list again for every
  repetition r >= 1, shifted the same way (START/END pairs stay balanced per
  repetition because the whole list is repeated).  A repetition's strings, dict
  keys among them, are new objects where the seed's are its own (pickled anew),
  and the seed's objects where it shares them (memo reads): torch writes an
  annotation's "stage" and "name" keys anew in every dict, its trace entries'
  keys once.

Consistency (what a replay of the grown file sees)
--------------------------------------------------
Repeating the whole trace verbatim would be inconsistent: allocations and segments
that are still alive at the end of the seed trace would be allocated again at the
same address (double alloc), and frees of blocks allocated before recording
started (ring-buffer truncation, pre-history) would free them a second time.  So
repetition 0 is the seed trace as is, and repetitions >= 1 keep only *complete
lifetimes*:
  * a block lifetime `alloc A` ... [`free_requested A`] ... `free_completed A`
    that starts and ends inside the seed trace;
  * a segment lifetime `segment_alloc A` ... `segment_free A` or
    `segment_map A,S` ... `segment_unmap A,S` (same address and size);
  * every entry that does not change allocator state (`snapshot`, `oom`, and any
    unknown action) is kept.
Dropped in repetitions >= 1: allocations/segments still alive (or pending free)
at the end of the seed, frees of blocks/segments that the seed trace never
allocated, partial unmaps, and complete lifetimes whose address range overlaps a
block that is active in the final `segments` (or a segment of the final
`segments`, for segment lifetimes): such a range is occupied while the later
repetitions run, because persistent state is never freed.
Hence each repetition >= 1 is balanced (net effect zero) and the allocator state
at the end of every repetition equals the state at the end of the seed trace,
which is exactly the seed's `segments`.  A replay of the grown file therefore
never sees a double alloc, a free of an unknown block, or a double segment_alloc,
and its final state matches `segments`; memory stays bounded (no k-fold leak).
Not reproduced: `snapshot` entries of repetitions >= 1 keep the seed's `size`
(active bytes at that moment of the seed), which is off by the persistent and
pre-existing blocks; `oom` entries repeat with the seed's `device_free`;
transient blocks are checked for overlap with live blocks only, not for lying
inside a segment (if a transient segment was dropped for overlapping a final
segment, its transient blocks may fall in that final segment's range); the
caching allocator's real address choices in a longer run are not simulated
(repetitions reuse the seed's addresses, as a steady-state training loop does).

Object sharing (pickle memo) -- kept as torch writes it
-------------------------------------------------------
torch's `py_symbolize` makes one dict per unique frame (shared by every stack
that contains it) and one list per *captured traceback*: a traceback is shared
only by the events of one allocator call (segment_alloc + alloc, free_requested +
free_completed, alloc + its live block), never across allocations -- the seeds
show many distinct list objects with identical contents (train.pickle: 87 lists,
15 distinct contents, 30 separate empty lists).  So with the default
`--stacks per-rep`, every repetition gets NEW list objects (one clone per seed
list object, so the within-repetition sharing pattern is kept) holding the SAME
frame dict objects; key strings and action strings are the seed's shared
objects; values that the seed holds once (e.g. the per-entry `compile_context`
"N/A") are fresh strings per entry; each trace entry is a new dict.
`--stacks shared` instead reuses the seed's list objects in every repetition
(denser, more memo hits; this is NOT what a long real run looks like).

Writing
-------
The output is byte-identical to `pickle.dump(obj, f, protocol=4)` of the grown
object (CPython's C pickler: MEMOIZE/BINGET, batches of 1000, 64 KiB FRAMEs),
but it is streamed by a small specialised writer so that a 1 GB output never
holds the ~15 M entry dicts in memory (the in-memory object plus pickle's memo
would need ~10 GB).  `--verify` builds the object in memory as well, runs the
real `pickle.dump(..., protocol=4)` and checks the bytes are identical (use it
on small sizes), and `--in-memory` writes with pickle.dump directly.
"""
import argparse
import gzip
import io
import os
import pickle
import resource
import struct
import subprocess
import sys
import time

FRAME_SIZE_TARGET = 64 * 1024
BATCHSIZE = 1000

BLOCK_OPEN = ("alloc",)
BLOCK_FREE = ("free_requested", "free_completed")
SEG_OPEN = ("segment_alloc", "segment_map")
SEG_CLOSE = {"segment_free": "segment_alloc", "segment_unmap": "segment_map"}
STATEFUL = set(BLOCK_OPEN) | set(BLOCK_FREE) | set(SEG_OPEN) | set(SEG_CLOSE)


# --------------------------------------------------------------------------- input

def load_snapshot(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            return pickle.load(f)
    if path.endswith(".zst") or path.endswith(".zstd"):
        try:
            import zstandard  # type: ignore
            with open(path, "rb") as raw:
                with zstandard.ZstdDecompressor().stream_reader(raw) as f:
                    return pickle.load(io.BufferedReader(f))
        except ImportError:
            p = subprocess.Popen(["zstd", "-dc", path], stdout=subprocess.PIPE)
            try:
                obj = pickle.load(p.stdout)
            finally:
                p.stdout.close()
                if p.wait() != 0:
                    raise SystemExit("zstd -dc %s failed" % path)
            return obj
    with open(path, "rb") as f:
        return pickle.load(f)


def count_refs(root):
    """id -> number of times pickle would meet the object (containers and str)."""
    refs = {}
    keep = []  # keep objects alive so ids stay unique
    stack = [root]
    while stack:
        o = stack.pop()
        t = type(o)
        if t not in (dict, list, tuple, str):
            continue
        i = id(o)
        n = refs.get(i)
        if n is not None:
            refs[i] = n + 1
            continue
        refs[i] = 1
        keep.append(o)
        if t is dict:
            for k, v in o.items():
                stack.append(k)
                stack.append(v)
        elif t is list or t is tuple:
            stack.extend(o)
    return refs


# --------------------------------------------------------------------------- plan

def overlaps(a, n, ranges):
    for s, e in ranges:
        if a < e and s < a + max(n, 1):
            return True
    return False


def plan_device(trace, device, segments):
    """Indices of entries kept in repetitions >= 1, plus counts of what was dropped."""
    live_blocks = [(b["address"], b["address"] + b["size"])
                   for s in segments if s.get("device", device) == device
                   for b in s.get("blocks", ())
                   if b.get("state") != "inactive" and "address" in b]
    final_segs = [(s["address"], s["address"] + s["total_size"])
                  for s in segments if s.get("device", device) == device and "address" in s]
    group = [None] * len(trace)   # lifetime id per entry, or None (stateless)
    drop = [False] * len(trace)
    lifetimes = []                # [indices, complete, kind, addr, size]
    open_blk, open_seg = {}, {}
    why = {"incomplete_block": 0, "incomplete_segment": 0, "orphan_free": 0,
           "overlap_persistent": 0}
    for i, e in enumerate(trace):
        a = e.get("action")
        if a not in STATEFUL:
            continue
        addr = e.get("addr")
        if a == "alloc":
            lt = [[i], False, "block", addr, e.get("size", 0)]
            lifetimes.append(lt)
            open_blk[addr] = lt
        elif a in BLOCK_FREE:
            lt = open_blk.get(addr)
            if lt is None:
                drop[i] = True
                why["orphan_free"] += 1
                continue
            lt[0].append(i)
            if a == "free_completed":
                lt[1] = True
                del open_blk[addr]
        elif a in SEG_OPEN:
            lt = [[i], False, a, addr, e.get("size", 0)]
            lifetimes.append(lt)
            open_seg[addr] = lt
        else:  # segment_free / segment_unmap
            lt = open_seg.get(addr)
            if lt is None or lt[2] != SEG_CLOSE[a] or lt[4] != e.get("size"):
                drop[i] = True
                why["orphan_free"] += 1
                continue
            lt[0].append(i)
            lt[1] = True
            del open_seg[addr]
    for idxs, complete, kind, addr, size in lifetimes:
        bad = False
        if not complete:
            why["incomplete_block" if kind == "block" else "incomplete_segment"] += len(idxs)
            bad = True
        elif overlaps(addr, size, live_blocks if kind == "block" else final_segs):
            why["overlap_persistent"] += len(idxs)
            bad = True
        if bad:
            for i in idxs:
                drop[i] = True
    keep = [i for i in range(len(trace)) if not drop[i]]
    return keep, why


# --------------------------------------------------------------------------- writer

class Writer:
    """Streams exactly what CPython's C pickler (protocol 4) writes for
    dict/list/tuple/str/int/float/bool/None, with hooks for objects that are
    written once and never referenced again (no memo registration needed)."""

    def __init__(self, f):
        self.f = f                  # None = count only
        self.buf = bytearray()      # current frame body
        self.total = 0              # bytes handed to f so far
        self.memo = {}              # id -> memo index (shared objects only)
        self.alive = []             # keeps memoized objects alive
        self.nmemo = 0              # number of MEMOIZE ops = next memo index
        self.nget = 0

    # framing: a frame is committed once its body reaches 64 KiB, checked at
    # the start of every save() (as pickle.py's framer does; the C pickler
    # produces the same bytes, checked by --verify).
    def boundary(self):
        if len(self.buf) >= FRAME_SIZE_TARGET:
            self.commit()

    def commit(self):
        if self.buf:
            hdr = b"\x95" + struct.pack("<Q", len(self.buf))
            if self.f is not None:
                self.f.write(hdr)
                self.f.write(self.buf)
            self.total += len(hdr) + len(self.buf)
            self.buf = bytearray()

    def start(self):
        if self.f is not None:
            self.f.write(b"\x80\x04")
        self.total += 2

    def finish(self):
        self.buf += b"."
        self.commit()

    # memo
    def memoize(self, obj=None):
        self.buf += b"\x94"
        if obj is not None:
            self.memo[id(obj)] = self.nmemo
            self.alive.append(obj)
        self.nmemo += 1
        return self.nmemo - 1

    def get(self, idx):
        self.nget += 1
        if idx < 256:
            self.buf += b"h" + bytes((idx,))
        else:
            self.buf += b"j" + struct.pack("<I", idx)

    # atoms
    def put_int(self, v):
        b = self.buf
        if -0x80000000 <= v <= 0x7FFFFFFF:
            if 0 <= v <= 0xFF:
                b += b"K" + bytes((v,))
            elif 0 <= v <= 0xFFFF:
                b += b"M" + struct.pack("<H", v)
            else:
                b += b"J" + struct.pack("<i", v)
        else:
            n = (v.bit_length() >> 3) + 1
            enc = v.to_bytes(n, "little", signed=True)
            if v < 0 and n > 1 and enc[-1] == 0xFF and (enc[-2] & 0x80):
                enc = enc[:-1]
            if len(enc) < 256:
                b += b"\x8a" + bytes((len(enc),)) + enc
            else:
                b += b"\x8b" + struct.pack("<i", len(enc)) + enc

    def put_str_body(self, s):
        enc = s.encode("utf-8", "surrogatepass")
        n = len(enc)
        if n <= 0xFF:
            self.buf += b"\x8c" + bytes((n,)) + enc
        elif n >= FRAME_SIZE_TARGET:  # written outside any frame, like CPython
            self.commit()
            hdr = (b"\x8d" + struct.pack("<Q", n)) if n > 0xFFFFFFFF else (b"X" + struct.pack("<I", n))
            if self.f is not None:
                self.f.write(hdr)
                self.f.write(enc)
            self.total += len(hdr) + n
        else:
            self.buf += b"X" + struct.pack("<I", n) + enc

    # generic save with memo by identity
    def save(self, o):
        self.boundary()
        self._save(o)

    def _save(self, o):
        t = type(o)
        if o is None:
            self.buf += b"N"
            return
        if o is True or o is False:
            self.buf += b"\x88" if o else b"\x89"
            return
        if t is int:
            self.put_int(o)
            return
        if t is float:
            self.buf += b"G" + struct.pack(">d", o)
            return
        idx = self.memo.get(id(o))
        if idx is not None:
            self.get(idx)
            return
        if t is str:
            self.put_str_body(o)
            self.memoize(o)
        elif t is dict:
            self.buf += b"}"
            self.memoize(o)
            self.dict_items(o.items(), len(o), self.save, self.save)
        elif t is list:
            self.buf += b"]"
            self.memoize(o)
            self.list_items(o, len(o), self.save)
        elif t is tuple:
            n = len(o)
            if n == 0:
                self.buf += b")"
                return
            if n <= 3:
                for x in o:
                    self.save(x)
                self.buf += (b"\x85", b"\x86", b"\x87")[n - 1]
            else:
                self.buf += b"("
                for x in o:
                    self.save(x)
                self.buf += b"t"
            self.memoize(o)
        else:
            raise TypeError("unsupported type in snapshot: %r" % t)

    def list_items(self, it, n, save_item):
        # C batch_list_exact: 1 item -> item APPEND; else MARK <=1000 items APPENDS ...
        if n == 0:
            return
        if n == 1:
            for x in it:
                save_item(x)
            self.buf += b"a"
            return
        done = 0
        self.buf += b"("
        for x in it:
            save_item(x)
            done += 1
            if done % BATCHSIZE == 0:
                self.buf += b"e"
                if done < n:
                    self.buf += b"("
        if done % BATCHSIZE:
            self.buf += b"e"
        assert done == n, (done, n)

    def dict_items(self, items, n, save_key, save_val, save_kv=None):
        """C batch_dict_exact. save_kv(key, value), if given, replaces save_val(value)."""
        if n == 0:
            return

        def one(k, v):
            save_key(k)
            if save_kv is not None:
                save_kv(k, v)
            else:
                save_val(v)
        if n == 1:
            for k, v in items:
                one(k, v)
            self.buf += b"s"
            return
        done = 0
        self.buf += b"("
        for k, v in items:
            one(k, v)
            done += 1
            if done % BATCHSIZE == 0:
                self.buf += b"u"
                if done < n:
                    self.buf += b"("
        if done % BATCHSIZE:
            self.buf += b"u"


# --------------------------------------------------------------------------- grower

def fresh_str(s):
    return s.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")


class Grower:
    def __init__(self, snap, stacks="per-rep"):
        self.snap = snap
        self.stacks = stacks
        self.refs = count_refs(snap)
        traces = snap.get("device_traces", [])
        anns = snap.get("external_annotations", [])
        times = [e["time_us"] for t in traces for e in t if "time_us" in e]
        times += [a["time_us"] for a in anns if isinstance(a, dict) and "time_us" in a]
        if not times:
            raise SystemExit("seed has no time_us in its traces; cannot grow it")
        self.shift = max(times) - min(times) + 1
        segs = snap.get("segments", [])
        self.plans = []
        self.why = {}
        for d, t in enumerate(traces):
            keep, why = plan_device(t, d, segs)
            self.plans.append([t[i] for i in keep])
            for key, v in why.items():
                self.why[key] = self.why.get(key, 0) + v
        self.anns = anns
        self.rep_lists = {}

    def shared(self, v):
        return self.refs.get(id(v), 2) > 1

    # ---- in-memory form of repetition r of a value (for --verify / --in-memory)
    def copy_value(self, v, r, key=None):
        t = type(v)
        if key == "time_us" and t is int:
            return v + r * self.shift
        if t is str:
            return v if self.shared(v) else fresh_str(v)
        if t is list:
            if key == "frames" and self.stacks == "shared":
                return v
            c = self.rep_lists.get(id(v))
            if c is None:
                c = self.rep_lists[id(v)] = []
                c.extend(x if type(x) is dict else self.copy_value(x, r) for x in v)
            return c
        if t is dict:
            if key is not None and self.shared(v):
                return v          # frame dicts stay the same objects
            # A key is copied as a value is: torch writes an annotation's
            # "stage" and "name" anew in each dict, its trace entries' keys
            # once (the same objects throughout).
            return {self.copy_value(kk, r): self.copy_value(x, r, kk) for kk, x in v.items()}
        if t is tuple and not self.shared(v):
            return tuple([self.copy_value(x, r) for x in v])
        return v

    def build(self, k):
        """The grown object, in memory (only for small outputs)."""
        out = {}
        for key, val in self.snap.items():
            if key == "device_traces":
                val = [self.build_list(t, p, k) for t, p in zip(val, self.plans)]
            elif key == "external_annotations":
                val = self.build_list(val, val, k)
            out[key] = val
        return out

    def build_list(self, rep0, later, k):
        out = list(rep0)
        for r in range(1, k):
            self.rep_lists = {}
            out.extend(self.copy_value(e, r) for e in later)
        self.rep_lists = {}
        return out

    # ---- streaming: same bytes as pickle.dump(self.build(k), f, protocol=4)
    def stream(self, w, k):
        s = self.snap
        w.start()

        def save_top(key, v):
            if key == "device_traces":
                w.buf += b"]"
                w.memoize(v)
                w.list_items(range(len(v)), len(v),
                             lambda d: (w.boundary(), self.stream_list(w, v[d], self.plans[d], k)))
            elif key == "external_annotations" and type(v) is list:
                self.stream_list(w, v, v, k)
            else:
                w._save(v)
        w.boundary()
        w.buf += b"}"
        w.memoize(s)

        def save_top_b(key, v):
            w.boundary()
            save_top(key, v)
        w.dict_items(s.items(), len(s), w.save, None, save_top_b)
        w.finish()

    def stream_list(self, w, rep0, later, k):
        """rep0 (the seed list, as is) then k-1 repetitions of `later`."""
        w.buf += b"]"
        w.memoize(rep0)
        n = len(rep0) + (k - 1) * len(later)

        def items():
            for e in rep0:
                yield 0, e
            for r in range(1, k):
                self.rep_lists = {}
                for e in later:
                    yield r, e
            self.rep_lists = {}

        def save_item(re):
            r, e = re
            if r == 0:
                w.save(e)
            else:
                self.stream_fresh(w, e, r)
        w.list_items(items(), n, save_item)

    def stream_fresh(self, w, v, r, key=None):
        """Write repetition r's copy of v (as copy_value builds it) without building it."""
        w.boundary()
        t = type(v)
        if key == "time_us" and t is int:
            w.put_int(v + r * self.shift)
        elif t is str:
            if self.shared(v):
                w._save(v)
            else:
                w.put_str_body(v)
                w.memoize()
        elif t is list:
            if key == "frames" and self.stacks == "shared":
                w._save(v)
                return
            idx = self.rep_lists.get(id(v))
            if idx is not None:
                w.get(idx)
                return
            w.buf += b"]"
            self.rep_lists[id(v)] = w.memoize()

            def item(x):
                if type(x) is dict:      # frame dicts: always the shared objects
                    w.save(x)
                else:
                    self.stream_fresh(w, x, r)
            w.list_items(v, len(v), item)
        elif t is dict:
            if key is not None and self.shared(v):
                w._save(v)
                return
            w.buf += b"}"
            w.memoize()

            def kv(kk, x):
                self.stream_fresh(w, x, r, kk)
            w.dict_items(v.items(), len(v), lambda kk: self.stream_fresh(w, kk, r), None, kv)
        elif t is tuple and not self.shared(v):
            n = len(v)
            if n == 0:
                w.buf += b")"
                return
            if n > 3:
                w.buf += b"("
            for x in v:
                self.stream_fresh(w, x, r)
            w.buf += (b"\x85", b"\x86", b"\x87")[n - 1] if n <= 3 else b"t"
            w.memoize()
        else:
            w._save(v)


# --------------------------------------------------------------------------- main

class CountingFile:
    def __init__(self):
        self.n = 0

    def write(self, b):
        self.n += len(b)


def output_stats(g, k):
    traces = g.snap.get("device_traces", [])
    entries = [len(t) + (k - 1) * len(p) for t, p in zip(traces, g.plans)]
    per_rep_lists = set()
    frame_dicts = set()
    refs = 0
    for p in g.plans:
        for e in p:
            fr = e.get("frames") if isinstance(e, dict) else None
            if isinstance(fr, list):
                per_rep_lists.add(id(fr))
                refs += len(fr)
    rep0_lists = set()
    rep0_refs = 0
    for t in traces:
        for e in t:
            fr = e.get("frames") if isinstance(e, dict) else None
            if isinstance(fr, list):
                rep0_lists.add(id(fr))
                rep0_refs += len(fr)
                frame_dicts.update(id(f) for f in fr)
    if g.stacks == "shared":
        list_objs = len(rep0_lists)
    else:
        list_objs = len(rep0_lists) + (k - 1) * len(per_rep_lists)
    return {
        "entries_per_device": entries,
        "entries": sum(entries),
        "seed_entries": sum(len(t) for t in traces),
        "kept_per_repetition": sum(len(p) for p in g.plans),
        "dropped_per_repetition": g.why,
        "trace_frame_list_objects": list_objs,
        "trace_frame_refs": rep0_refs + (k - 1) * refs,
        "unique_frame_dicts_in_trace": len(frame_dicts),
        "annotations": len(g.anns) * k,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--size-mb", type=float, default=1000.0,
                    help="target output size in MB (10^6 bytes); default 1000")
    ap.add_argument("--reps", type=int, default=0,
                    help="number of repetitions k (overrides --size-mb)")
    ap.add_argument("--stacks", choices=("per-rep", "shared"), default="per-rep",
                    help="per-rep: new frame-list objects per repetition, as a long real run "
                         "has (default); shared: reuse the seed's list objects")
    ap.add_argument("--verify", action="store_true",
                    help="also build the object in memory and check that pickle.dump(protocol=4) "
                         "writes the same bytes (small sizes only)")
    ap.add_argument("--in-memory", action="store_true",
                    help="write with pickle.dump(protocol=4) of the in-memory object")
    args = ap.parse_args()

    t0 = time.time()
    snap = load_snapshot(args.src)
    if not isinstance(snap, dict) or "device_traces" not in snap:
        raise SystemExit("%s: not a 2.x snapshot dict with device_traces" % args.src)
    g = Grower(snap, args.stacks)
    if not any(g.plans):
        raise SystemExit("seed trace has no balanced part to repeat")

    def size_for(k):
        w = Writer(CountingFile())
        g.stream(w, k)
        return w.total

    s1 = size_for(1)
    if args.reps > 0:
        k = args.reps
    else:
        per = size_for(2) - s1
        target = int(args.size_mb * 1e6)
        k = max(1, 1 + round((target - s1) / per))
    print("seed %s: %d bytes, %d entries; repeating %d entries per repetition, time shift %d us, k=%d"
          % (args.src, s1, sum(len(t) for t in snap["device_traces"]),
             sum(len(p) for p in g.plans), g.shift, k), flush=True)

    tmp = args.out + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(tmp, "wb", buffering=1 << 20) as f:
        if args.in_memory:
            pickle.dump(g.build(k), f, protocol=4)
            w = None
        else:
            w = Writer(f)
            g.stream(w, k)
    os.replace(tmp, args.out)
    size = os.path.getsize(args.out)
    st = output_stats(g, k)
    st.update({"k": k, "bytes": size, "MB": round(size / 1e6, 1),
               "bytes_per_entry": round(size / max(st["entries"], 1), 1),
               "stacks": args.stacks,
               "seconds": round(time.time() - t0, 1),
               "peak_rss_MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)})
    if w is not None:
        st["memoize_ops"] = w.nmemo
        st["memo_gets_written_by_writer"] = w.nget
    if args.verify:
        ref = pickle.dumps(g.build(k), protocol=4)
        with open(args.out, "rb") as f:
            mine = f.read()
        if ref != mine:
            i = next((j for j in range(min(len(ref), len(mine))) if ref[j] != mine[j]), min(len(ref), len(mine)))
            raise SystemExit("VERIFY FAILED: differs from pickle.dump at byte %d (len %d vs %d)"
                             % (i, len(mine), len(ref)))
        st["verify"] = "byte-identical to pickle.dump(obj, protocol=4)"
    for key, v in st.items():
        print("%s: %s" % (key, v))


if __name__ == "__main__":
    main()
