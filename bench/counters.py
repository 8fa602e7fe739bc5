#!/usr/bin/env python3
"""Count a command's CPU events with perf_event_open, where no `perf` is.

    python3 bench/counters.py [--events LIST] -- CMD [ARG...]

The 16-core GPU host has no `perf`, and its speed against the dev VM's
differs from function to function (bench/RESULTS.md, 2026-12-07): the
pickle parser's loads take 3.5-6x there, its first touches of fresh memory
less than 1x. Counts of cycles, instructions, cache and TLB misses and
branch misses tell which the host pays for. The counters follow CMD and
every thread and child it starts (inherit), from its exec on; the kernel's
share is counted too where the machine lets it.

Each event prints its count, scaled up where the PMU had to share its
counters among more events than it has (the percentage is the time it
counted), or why it could not be counted (a VM without a PMU counts only
the software events; the events refused for one reason share a line).
Then the ratios that matter: instructions per cycle and misses per 1,000
instructions. CMD's exit status is this tool's.
"""

import ctypes
import errno
import os
import struct
import sys

# perf_event_attr.type and config (linux/perf_event.h).
HARDWARE, SOFTWARE, HW_CACHE = 0, 1, 3
L1D, LL, DTLB = 0, 2, 3
READ, ACCESS, MISS = 0, 0, 1


def cache(level, result):
    return level | READ << 8 | result << 16


EVENTS = {
    "cycles": (HARDWARE, 0),
    "instructions": (HARDWARE, 1),
    "cache-references": (HARDWARE, 2),
    "cache-misses": (HARDWARE, 3),
    "branches": (HARDWARE, 4),
    "branch-misses": (HARDWARE, 5),
    "L1-dcache-loads": (HW_CACHE, cache(L1D, ACCESS)),
    "L1-dcache-load-misses": (HW_CACHE, cache(L1D, MISS)),
    "LLC-loads": (HW_CACHE, cache(LL, ACCESS)),
    "LLC-load-misses": (HW_CACHE, cache(LL, MISS)),
    "dTLB-load-misses": (HW_CACHE, cache(DTLB, MISS)),
    "task-clock": (SOFTWARE, 1),
    "page-faults": (SOFTWARE, 2),
    "context-switches": (SOFTWARE, 3),
    "cpu-migrations": (SOFTWARE, 4),
}
DEFAULT = list(EVENTS)

# Ratios printed after the counts: name, numerator, denominator, scale.
RATIOS = [
    ("instructions per cycle", "instructions", "cycles", 1),
    ("cache misses per 1k instructions", "cache-misses", "instructions", 1000),
    ("L1d load misses per 1k instructions", "L1-dcache-load-misses", "instructions", 1000),
    ("LLC load misses per 1k instructions", "LLC-load-misses", "instructions", 1000),
    ("dTLB load misses per 1k instructions", "dTLB-load-misses", "instructions", 1000),
    ("branch misses per 1k instructions", "branch-misses", "instructions", 1000),
    ("GHz (cycles per task-clock ns)", "cycles", "task-clock", 1),
]

USAGE = "python3 bench/counters.py [--events LIST] -- CMD [ARG...]"

# Bits of perf_event_attr's flags word.
DISABLED, INHERIT, EXCLUDE_KERNEL, ENABLE_ON_EXEC = 1 << 0, 1 << 1, 1 << 5, 1 << 12
# read_format: the times the event was enabled and running, to scale it.
TOTAL_TIME_ENABLED, TOTAL_TIME_RUNNING = 1, 2
FD_CLOEXEC = 8
ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: the fields up to config1
NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}


def attr(kind, config, exclude_kernel):
    """perf_event_attr, version 0: counting, not sampling."""
    flags = DISABLED | INHERIT | ENABLE_ON_EXEC | (EXCLUDE_KERNEL if exclude_kernel else 0)
    return struct.pack(
        "=IIQQQQQIIQ",
        kind, ATTR_SIZE, config,
        0, 0,  # sample_period, sample_type
        TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING,
        flags,
        0, 0, 0,  # wakeup_events, bp_type, config1
    )


class Counter:
    def __init__(self, name, fd=None, err=None, kernel=True):
        self.name, self.fd, self.err, self.kernel = name, fd, err, kernel
        self.value = self.enabled = self.running = 0

    def read(self):
        if self.fd is None:
            return
        b = os.read(self.fd, 24)
        os.close(self.fd)
        self.fd = None
        if len(b) != 24:
            self.err = f"read {len(b)} bytes, not 24"
            return
        raw, self.enabled, self.running = struct.unpack("=QQQ", b)
        if self.running == 0:
            self.err = "never scheduled on the PMU"
        else:
            self.value = raw * self.enabled / self.running


def open_counter(libc, nr, name, pid):
    """Opens name's counter on pid, with the kernel's share if allowed."""
    kind, config = EVENTS[name]
    err = None
    for exclude_kernel in (False, True):
        a = ctypes.create_string_buffer(attr(kind, config, exclude_kernel), ATTR_SIZE)
        fd = libc.syscall(nr, a, pid, -1, -1, FD_CLOEXEC)
        if fd >= 0:
            return Counter(name, fd, kernel=not exclude_kernel)
        e = ctypes.get_errno()
        err = f"perf_event_open: {os.strerror(e)} (errno {e}){WHY.get(e, '')}"
        if e not in (errno.EACCES, errno.EPERM):  # those: try without the kernel
            break
    return Counter(name, err=err)


# What an errno of perf_event_open says on the machines we run on.
WHY = {
    errno.ENOENT: ": no such counter here (a VM without a PMU has only the software events)",
    errno.EACCES: ": not permitted (kernel.perf_event_paranoid)",
    errno.EPERM: ": not permitted (kernel.perf_event_paranoid, or a container's seccomp filter)",
    errno.ENOSYS: ": this kernel or sandbox has no perf_event_open",
}


def run(argv, names):
    """Runs argv with names counted; returns its exit status and counters."""
    nr = NR_PERF_EVENT_OPEN.get(os.uname().machine)
    if nr is None:
        raise SystemExit(f"counters: no perf_event_open number for {os.uname().machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        # The child waits until its counters are open, then execs: they
        # start counting at the exec (ENABLE_ON_EXEC).
        os.close(go_w)
        if os.read(go_r, 1) != b"g":
            os._exit(126)  # the parent failed before it let the child go
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            print(f"counters: {argv[0]}: {e.strerror}", file=sys.stderr)
            os._exit(127)
    os.close(go_r)
    try:
        counters = [open_counter(libc, nr, n, pid) for n in names]
        os.write(go_w, b"g")
    finally:
        os.close(go_w)
    _, status = os.waitpid(pid, 0)
    for c in counters:
        c.read()
    return os.waitstatus_to_exitcode(status), counters


def report(counters):
    """The counts and ratios as Markdown lines; the events that could not be
    counted for one reason share a line."""
    lines = ["| event | count | counted | |", "|---|---:|---:|---|"]
    by, failed = {}, {}
    for c in counters:
        if c.err:
            failed.setdefault(c.err, []).append(c.name)
            continue
        by[c.name] = c.value
        share = 100 * c.running / c.enabled if c.enabled else 0
        note = "" if c.kernel else "user only"
        lines.append(f"| {c.name} | {c.value:,.0f} | {share:.0f}% | {note} |")
    for err, names in failed.items():
        lines.append(f"| {', '.join(names)} | | | {err} |")
    ratios = [(name, scale * by[num] / by[den]) for name, num, den, scale in RATIOS if by.get(num) and by.get(den)]
    if ratios:
        lines += ["", "| ratio | value |", "|---|---:|"]
        lines += [f"| {name} | {v:.3f} |" for name, v in ratios]
    return lines


def main(args):
    names = DEFAULT
    if args[:1] == ["--events"]:
        names, args = (args[1].split(",") if len(args) > 1 else []), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    unknown = [n for n in names if n not in EVENTS]
    if not args or not names or unknown:
        msg = f"unknown events: {', '.join(unknown)}; known: {', '.join(EVENTS)}" if unknown else f"usage: {USAGE}"
        print(f"counters: {msg}", file=sys.stderr)
        return 2
    code, counters = run(args, names)
    print("\n".join(report(counters)))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
