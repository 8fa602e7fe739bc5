"""Tests of counters.py under plain python3: the attribute it hands the
kernel, the report it prints, and a real count of a real command where the
machine allows perf_event_open (a container's seccomp filter may not: then
every counter must say why)."""

import io
import os
import struct
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(__file__))
import counters  # noqa: E402


class AttrTest(unittest.TestCase):
    def test_layout(self):
        # perf_event_attr version 0: type, size, config, sample_period,
        # sample_type, read_format, the flags word, then 16 more bytes.
        a = counters.attr(counters.HW_CACHE, counters.cache(counters.DTLB, counters.MISS), exclude_kernel=True)
        self.assertEqual(len(a), 64)
        kind, size, config, period, stype, rformat, flags = struct.unpack_from("=IIQQQQQ", a)
        self.assertEqual((kind, size, config, period, stype), (3, 64, 3 | 1 << 16, 0, 0))
        self.assertEqual(rformat, 3)  # time enabled and time running
        self.assertEqual(flags, 1 | 2 | 1 << 5 | 1 << 12)  # disabled, inherit, exclude_kernel, enable_on_exec
        self.assertEqual(a[48:], bytes(16))
        _, _, _, _, _, _, flags = struct.unpack_from("=IIQQQQQ", counters.attr(0, 1, exclude_kernel=False))
        self.assertEqual(flags & 1 << 5, 0)


def counter(name, value, enabled=100, running=100, kernel=True):
    c = counters.Counter(name, kernel=kernel)
    c.value, c.enabled, c.running = value, enabled, running
    return c


class ReportTest(unittest.TestCase):
    def test_counts_and_ratios(self):
        lines = counters.report([
            counter("cycles", 2e9),
            counter("instructions", 3e9, enabled=100, running=50),
            counter("branch-misses", 6e6, kernel=False),
            counters.Counter("LLC-load-misses", err="perf_event_open: nope"),
            counter("task-clock", 1e9),
            counters.Counter("dTLB-load-misses", err="perf_event_open: nope"),
            counters.Counter("LLC-loads", err="perf_event_open: other"),
        ])
        text = "\n".join(lines)
        self.assertIn("| cycles | 2,000,000,000 | 100% |  |", text)
        self.assertIn("| instructions | 3,000,000,000 | 50% |  |", text)
        self.assertIn("| branch-misses | 6,000,000 | 100% | user only |", text)
        self.assertIn("| LLC-load-misses, dTLB-load-misses | | | perf_event_open: nope |", text)
        self.assertIn("| LLC-loads | | | perf_event_open: other |", text)
        self.assertIn("| instructions per cycle | 1.500 |", text)
        self.assertIn("| branch misses per 1k instructions | 2.000 |", text)
        self.assertIn("| GHz (cycles per task-clock ns) | 2.000 |", text)
        self.assertNotIn("LLC load misses per", text)  # not counted: no ratio

    def test_no_hardware_no_ratios(self):
        text = "\n".join(counters.report([counter("task-clock", 5e6)]))
        self.assertNotIn("ratio", text)


class RunTest(unittest.TestCase):
    def test_software_counts_of_a_real_command(self):
        # A command that touches 64 MiB: at least 16,384 page faults of 4 KiB
        # (fewer only with huge pages, which a fresh bytearray of a child
        # python does not get by default), and some task-clock.
        code = "b = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1"
        status, cs = counters.run([sys.executable, "-c", code], ["task-clock", "page-faults"])
        self.assertEqual(status, 0)
        by = {c.name: c for c in cs}
        if all(c.err and "perf_event_open" in c.err for c in cs):
            self.assertTrue(all("errno" in c.err for c in cs), [c.err for c in cs])
            return  # this sandbox refuses perf_event_open: each counter says so
        self.assertIsNone(by["page-faults"].err)
        self.assertGreaterEqual(by["page-faults"].value, 16384)
        self.assertGreater(by["task-clock"].value, 1e6)  # ns: over a millisecond

    def test_exit_status_is_the_commands(self):
        status, _ = counters.run(["sh", "-c", "exit 3"], ["task-clock"])
        self.assertEqual(status, 3)

    def test_a_missing_command(self):
        # The child reports it on file descriptor 2, which is a file here.
        with tempfile.TemporaryFile() as f:
            saved = os.dup(2)
            os.dup2(f.fileno(), 2)
            try:
                status, _ = counters.run(["/nonexistent/cmd"], ["task-clock"])
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            f.seek(0)
            err = f.read().decode()
        self.assertEqual(status, 127)
        self.assertIn("counters: /nonexistent/cmd: No such file or directory", err)


class MainTest(unittest.TestCase):
    def test_unknown_event(self):
        with redirect_stderr(io.StringIO()) as err:
            self.assertEqual(counters.main(["--events", "cycles,bogus", "--", "true"]), 2)
        self.assertIn("unknown events: bogus", err.getvalue())

    def test_no_command(self):
        for args in ([], ["--events"], ["--events", "cycles"], ["--events", "cycles", "--"]):
            with redirect_stderr(io.StringIO()) as err:
                self.assertEqual(counters.main(args), 2, args)
            self.assertIn("usage: python3 bench/counters.py", err.getvalue())

    def test_prints_a_table(self):
        with redirect_stdout(io.StringIO()) as out:
            self.assertEqual(counters.main(["--events", "task-clock", "--", "true"]), 0)
        self.assertIn("| task-clock |", out.getvalue())


if __name__ == "__main__":
    unittest.main()
