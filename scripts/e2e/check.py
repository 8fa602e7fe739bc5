"""Checks one gpu-e2e case, and summarizes them all.

  check.py case NAME --rc N --analysis FILE --dir RECORD_DIR --fixtures DIR
      prints one JSON line: {"case", "ok", "failures", "facts"}; copies the
      recorded files (pickles gzipped) and expected.json into DIR/NAME.
  check.py summary OUTDIR
      reads OUTDIR/results.jsonl and OUTDIR/timing/*.json, writes
      OUTDIR/results.json and OUTDIR/results.md; exits 1 if a case failed.
"""
import glob
import gzip
import json
import os
import shutil
import statistics
import sys

MiB = 1 << 20
FIXTURE_LIMIT = 5 * MiB


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"_error": "%s: %s" % (path, e)}


def dumps_of(rec_dir):
    notes = []
    for p in glob.glob(os.path.join(rec_dir, ".vramscope", "dumps-*.jsonl")):
        with open(p) as f:
            notes += [json.loads(line) for line in f if line.strip()]
    return notes


def files_of(rec_dir, suffix):
    return sorted(os.path.relpath(p, rec_dir) for p in glob.glob(os.path.join(rec_dir, "**", "*" + suffix), recursive=True))


def leaks(proc):
    return [f for f in proc.get("findings", []) if f.get("kind") == "leak"]


def functions(findings):
    return sorted({(f.get("callsite") or {}).get("function", "") for f in findings})


class Case:
    def __init__(self, name, rc, analysis, rec_dir):
        self.name, self.rc, self.a, self.dir = name, rc, analysis, rec_dir
        self.failures, self.facts = [], {"rc": rc}
        self.procs = analysis.get("processes", []) if isinstance(analysis, dict) else []
        self.facts["verdict"] = analysis.get("verdict")
        self.facts["processes"] = [
            {"id": p.get("id"), "rank": p.get("rank"), "tag": p.get("tag"), "verdict": p.get("verdict"),
             "leaks": [[(f.get("callsite") or {}).get("function"), f.get("bytes_per_step")] for f in leaks(p)],
             "findings": [[f.get("kind"), f.get("severity"), (f.get("callsite") or {}).get("function")]
                          for f in p.get("findings", [])]}
            for p in self.procs]
        self.facts["snapshots"] = files_of(rec_dir, ".pickle")
        self.facts["memory_logs"] = files_of(rec_dir, "_memory_log.csv")
        self.facts["dumps"] = [{k: d.get(k) for k in ("path", "reason", "step", "dump_seconds", "bytes")}
                               for d in dumps_of(rec_dir)]
        if "_error" in analysis:
            self.failures.append("no analysis: " + analysis["_error"])

    def expect(self, cond, msg):
        if not cond:
            self.failures.append(msg)

    def rc_is(self, want):
        self.expect(self.rc == want, "exit status %s, want %s" % (self.rc, want))

    def verdict_is(self, want):
        self.expect(self.a.get("verdict") == want, "verdict %r, want %r" % (self.a.get("verdict"), want))

    def one_process(self):
        self.expect(len(self.procs) == 1, "%d processes, want 1" % len(self.procs))
        return self.procs[0] if self.procs else {}

    def has_steps(self, *steps):
        for n in steps:
            self.expect(any(s.startswith("step%d/" % n) for s in self.facts["snapshots"]),
                        "no snapshot in step%d/" % n)

    def leak_in(self, proc, function, per_step=None):
        fs = [f for f in leaks(proc) if (f.get("callsite") or {}).get("function") == function]
        self.expect(fs, "%s: no leak naming %s (leaks: %s)" % (proc.get("id"), function, functions(leaks(proc))))
        if fs and per_step:
            got = fs[0].get("bytes_per_step") or 0
            self.expect(abs(got - per_step) <= per_step * 0.1,
                        "%s grows %d bytes/step, want %d" % (function, got, per_step))


def check_healthy(c):
    c.rc_is(0)
    c.verdict_is("healthy")
    c.one_process()
    c.has_steps(2, 3, 4)
    c.expect(c.facts["memory_logs"], "no memory log")


def check_leak(c):
    c.rc_is(3)  # --fail-on leak
    c.verdict_is("leak")
    c.leak_in(c.one_process(), "compute_logits", 16 * MiB)
    c.has_steps(2, 3, 4)


def check_oom(c):
    c.rc_is(1)
    c.verdict_is("oom")
    p = c.one_process()
    ooms = [f for f in p.get("findings", []) if f.get("kind") == "oom"]
    c.expect(ooms, "no oom finding")
    c.expect("build_attention_scores" in functions(ooms),
             "the OOM names %s, want build_attention_scores" % functions(ooms))
    snaps = [s for s in c.facts["snapshots"] if s.startswith("oom/")]
    msgs = files_of(c.dir, "_oom.txt")
    c.expect(snaps, "no snapshot in oom/")
    c.expect(msgs, "no OOM message file")
    for m in msgs:
        text = open(os.path.join(c.dir, m)).read()
        c.facts["oom_message"] = text.strip()[:300]
        c.expect(text.startswith("CUDA out of memory") or "OutOfMemoryError" in text
                 or text.startswith("CUDA error: out of memory"),
                 "the OOM message file holds %r, not torch's message" % text[:80])


def check_ddp(c):
    c.rc_is(0)
    ranks = sorted(p.get("rank") for p in c.procs if p.get("rank") is not None)
    c.expect(ranks == [0, 1], "ranks %s, want [0, 1] (and no process for torchrun's agent)" % ranks)
    c.expect(len(c.procs) == 2, "%d processes, want 2" % len(c.procs))
    by_rank = {p.get("rank"): p for p in c.procs}
    if 0 in by_rank:
        c.expect(by_rank[0].get("verdict") == "healthy", "rank 0 verdict %r, want healthy" % by_rank[0].get("verdict"))
    if 1 in by_rank:
        c.leak_in(by_rank[1], "cache_prompt_embeddings", 16 * MiB)
    for r in (0, 1):
        c.expect(any("_rank%d_" % r in s for s in c.facts["snapshots"]), "no snapshot of rank %d" % r)


def check_llama(c):
    c.rc_is(0)
    c.verdict_is("healthy")
    c.one_process()
    c.has_steps(2, 3, 4)


def check_server(c):
    c.rc_is(130)  # SIGINT forwarded, KeyboardInterrupt, exit 130
    c.one_process()
    reasons = [d["reason"] for d in c.facts["dumps"]]
    c.expect(reasons.count("interval") >= 2, "interval dumps: %d, want 2 or more" % reasons.count("interval"))
    c.expect("signal" in reasons, "no dump on SIGUSR1 (dumps: %s)" % reasons)
    c.expect(c.a.get("verdict") == "healthy", "verdict %r, want healthy" % c.a.get("verdict"))


def check_inert(c):
    c.rc_is(0)
    c.expect(not c.facts["snapshots"] and not c.facts["memory_logs"],
             "a process without CUDA left files: %s" % (c.facts["snapshots"] + c.facts["memory_logs"]))


def check_module(c):
    c.rc_is(0)
    c.has_steps(2, 3, 4)
    c.expect(any("_after-decode" in s for s in c.facts["snapshots"]), "no manual dump")
    c.expect(any(s.startswith("phase2/final/") for s in c.facts["snapshots"]), "no capture() dump")


CHECKS = {"healthy": check_healthy, "leak": check_leak, "oom": check_oom, "ddp": check_ddp,
          "llama": check_llama, "server": check_server, "inert_python": check_inert,
          "inert_torch": check_inert, "module": check_module}


def copy_fixtures(name, rec_dir, fixtures, expected):
    dst = os.path.join(fixtures, name)
    skipped = []
    for rel in files_of(rec_dir, ".pickle") + files_of(rec_dir, ".csv") + files_of(rec_dir, "_oom.txt"):
        src = os.path.join(rec_dir, rel)
        out = os.path.join(dst, rel + (".gz" if rel.endswith(".pickle") else ""))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if rel.endswith(".pickle"):
            with open(src, "rb") as f, gzip.open(out, "wb", compresslevel=9) as g:
                shutil.copyfileobj(f, g)
        else:
            shutil.copyfile(src, out)
        if os.path.getsize(out) > FIXTURE_LIMIT:
            os.remove(out)
            skipped.append(rel)
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True)
    return skipped


def case_main(argv):
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("--rc", type=int, required=True)
    p.add_argument("--analysis", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--fixtures")
    a = p.parse_args(argv)
    has_output = os.path.exists(a.analysis) and os.path.getsize(a.analysis) > 0
    analysis = load_json(a.analysis) if has_output else {}
    if not analysis and a.name.startswith("inert"):
        analysis = {"verdict": None}
    elif not analysis:
        analysis = {"_error": "%s is empty" % a.analysis}
    c = Case(a.name, a.rc, analysis, a.dir)
    try:
        CHECKS[a.name](c)
    except Exception as e:  # a check that crashes is a failure, not a pass
        c.failures.append("check crashed: %r" % (e,))
    if a.fixtures and c.facts["snapshots"]:
        c.facts["fixtures_skipped_over_5MB"] = copy_fixtures(
            a.name, a.dir, a.fixtures, {"case": a.name, "verdict": c.a.get("verdict"),
                                        "processes": c.facts["processes"], "exit_status": a.rc})
    print(json.dumps({"case": a.name, "ok": not c.failures, "failures": c.failures, "facts": c.facts}))


def summary_main(out):
    cases = []
    with open(os.path.join(out, "results.jsonl")) as f:
        cases = [json.loads(line) for line in f if line.strip()]
    timing = {}
    for p in sorted(glob.glob(os.path.join(out, "timing", "*.json"))):
        timing[os.path.basename(p)[:-5]] = load_json(p)
    overhead = {}
    for prog in sorted({k.split(".")[0] for k in timing}):
        base = timing.get(prog + ".plain", {}).get("median_ms")
        row = {"plain_ms": base}
        for mode in ("record", "logger"):
            t = timing.get("%s.%s" % (prog, mode), {}).get("median_ms")
            row[mode + "_ms"] = t
            if base and t:
                row[mode + "_overhead_pct"] = round((t / base - 1) * 100, 1)
        dumps = timing.get(prog + ".dumps", {})
        row.update({k: dumps.get(k) for k in ("dump_seconds_median", "snapshot_bytes_median", "trace_entries",
                                              "bytes_per_entry") if dumps})
        overhead[prog] = row
    env = load_json(os.path.join(out, "env.json"))
    res = {"ok": all(c["ok"] for c in cases), "cases": cases, "overhead": overhead, "timing": timing, "env": env}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=2)
    lines = ["# vramscope gpu-e2e", "", "env: `%s`" % json.dumps(env), "",
             "| case | ok | exit | verdict | failures |", "|---|---|---|---|---|"]
    for c in cases:
        lines.append("| %s | %s | %s | %s | %s |" % (c["case"], "yes" if c["ok"] else "**NO**", c["facts"].get("rc"),
                                                c["facts"].get("verdict"), "; ".join(c["failures"]) or ""))
    lines += ["", "## Overhead (median step time)", "",
              "| program | plain ms | record ms | record overhead | logger-only ms | logger overhead | dump s | snapshot bytes | trace entries | bytes/entry |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for prog, r in overhead.items():
        lines.append("| %s | %s | %s | %s%% | %s | %s%% | %s | %s | %s | %s |" % (
            prog, _f(r.get("plain_ms")), _f(r.get("record_ms")), r.get("record_overhead_pct"),
            _f(r.get("logger_ms")), r.get("logger_overhead_pct"), r.get("dump_seconds_median"),
            r.get("snapshot_bytes_median"), r.get("trace_entries"), r.get("bytes_per_entry")))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if res["ok"] else 1


def _f(x):
    return "%.2f" % x if isinstance(x, (int, float)) else "-"


def dumps_main(rec_dir, out):
    """Writes the median dump time and size of a record folder to out."""
    ds = [d for d in dumps_of(rec_dir) if d.get("reason") == "step"]
    res = {"dumps": len(ds)}
    if ds:
        res["dump_seconds_median"] = statistics.median(d["dump_seconds"] for d in ds)
        res["snapshot_bytes_median"] = int(statistics.median(d["bytes"] for d in ds))
        # Bytes per trace entry, to size --max-entries' default.
        last = max(ds, key=lambda d: d["step"])
        import pickle
        with open(os.path.join(rec_dir, last["path"]), "rb") as f:
            snap = pickle.load(f)
        entries = sum(len(t) for t in snap.get("device_traces", []))
        res["trace_entries"] = entries
        if entries:
            res["bytes_per_entry"] = round(last["bytes"] / entries)
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    if sys.argv[1] == "case":
        case_main(sys.argv[2:])
    elif sys.argv[1] == "summary":
        sys.exit(summary_main(sys.argv[2]))
    elif sys.argv[1] == "dumps":
        dumps_main(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
