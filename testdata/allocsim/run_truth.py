"""Ground truth for vramscope's allocator model: run every workload of
workloads.py under several allocator settings, each in a fresh process, and
write what torch measured to OUTDIR/truths.json.

  python3 testdata/allocsim/run_truth.py [OUTDIR] [--jobs N] [--budget SECONDS]

OUTDIR defaults to testdata/allocsim/out. Per workload:
  1. the default run, recorded from the start with Python stacks:
     OUTDIR/<workload>/default.pickle.gz (the trace the model replays);
  2. the what-if runs, each recorded too (trace only, no stacks) so the model can
     also be validated under that setting: OUTDIR/<workload>/<run>.pickle.gz.
Caps are derived from the default run's peaks (a cap between allocated and
reserved peak, a tight cap 1 % above the allocated peak, a roomy one for GC).
A failing run is reported in truths.json ("error") and the others go on; runs
not started before the time budget are listed as skipped.
"""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ["train_varlen", "varbatch", "fsdp_gather", "weight_update", "two_streams"]

# name -> (PYTORCH_CUDA_ALLOC_CONF, empty_cache at step ends, cap rule or None)
RUNS = {
    "expandable": ("expandable_segments:True", False, None),
    "max_split_128": ("max_split_size_mb:128", False, None),
    "roundup4": ("roundup_power2_divisions:4", False, None),
    "empty_cache": ("", True, None),
    "gc08": ("garbage_collection_threshold:0.8", False, "gc"),
    "cap_mid": ("", False, "mid"),
    "cap_mid_expandable": ("expandable_segments:True", False, "mid"),
    "cap_tight": ("", False, "tight"),
    "cap_tight_expandable": ("expandable_segments:True", False, "tight"),
}


def cap_bytes(rule, base):
    """The per-process limit of a capped run, from the default run's peaks."""
    alloc, res = base["max_memory_allocated"], base["max_memory_reserved"]
    if rule == "mid":
        return (alloc + res) // 2
    if rule == "tight":
        return int(alloc * 1.01)
    if rule == "gc":  # GC acts above 0.8 x limit, which sits below the default peak
        return int(res / 0.9)
    raise ValueError(rule)


def run_one(outdir, workload, name, conf, empty_cache, fraction, stacks, timeout):
    wdir = os.path.join(outdir, workload)
    os.makedirs(wdir, exist_ok=True)
    result = os.path.join(wdir, f"{name}.result.json")
    cmd = [sys.executable, os.path.join(HERE, "workloads.py"), workload, result,
           "--snapshot", os.path.join(wdir, f"{name}.pickle.gz")]
    if stacks:
        cmd.append("--stacks")
    if empty_cache:
        cmd.append("--empty-cache")
    if fraction is not None:
        cmd += ["--fraction", repr(fraction)]
    env = dict(os.environ)
    env.pop("PYTORCH_ALLOC_CONF", None)
    env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    t0 = time.time()
    entry = {"workload": workload, "run": name, "alloc_conf": conf,
             "empty_cache_at_step_end": empty_cache, "fraction": fraction}
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            entry["error"] = f"exit {p.returncode}: {p.stderr[-1500:]}"
        else:
            with open(result) as f:
                entry.update(json.load(f))
            os.remove(result)
    except subprocess.TimeoutExpired:
        entry["error"] = f"timed out after {timeout}s"
    except Exception as e:  # keep going whatever happens to one run
        entry["error"] = repr(e)
    entry["wall_seconds"] = round(time.time() - t0, 2)
    status = entry.get("error", "").splitlines()[-1:] or [
        f"reserved {entry.get('max_memory_reserved')} allocated {entry.get('max_memory_allocated')}"
        f" oom {entry.get('oom')}"]
    print(f"[{workload}/{name}] {entry['wall_seconds']}s {status[0]}", flush=True)
    return entry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir", nargs="?", default=os.path.join(HERE, "out"))
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--budget", type=float, default=330.0, help="seconds for all runs")
    ap.add_argument("--timeout", type=int, default=120, help="seconds for one run")
    ap.add_argument("--only", default=",".join(WORKLOADS))
    a = ap.parse_args()
    start = time.time()
    workloads = [w for w in a.only.split(",") if w]
    os.makedirs(a.outdir, exist_ok=True)
    truths = {"runs": [], "skipped": []}

    def left():
        return a.budget - (time.time() - start)

    with cf.ThreadPoolExecutor(a.jobs) as ex:
        base = {}
        futs = {ex.submit(run_one, a.outdir, w, "default", "", False, None, True, a.timeout): w
                for w in workloads}
        for f in cf.as_completed(futs):
            e = f.result()
            truths["runs"].append(e)
            if "error" not in e:
                base[futs[f]] = e
        todo = []
        for w in workloads:
            if w not in base:
                truths["skipped"].append({"workload": w, "why": "default run failed"})
                continue
            total = base[w]["device_total_memory"]
            for name, (conf, ec, rule) in RUNS.items():
                frac = None if rule is None else cap_bytes(rule, base[w]) / total
                todo.append((w, name, conf, ec, frac))
        futs = []
        for w, name, conf, ec, frac in todo:
            def job(w=w, name=name, conf=conf, ec=ec, frac=frac):
                if left() < 20:
                    return {"workload": w, "run": name, "skipped": "time budget spent"}
                return run_one(a.outdir, w, name, conf, ec, frac, False,
                               min(a.timeout, max(10, int(left()))))
            futs.append(ex.submit(job))
        for f in futs:
            e = f.result()
            (truths["skipped"] if "skipped" in e else truths["runs"]).append(e)
    truths["runs"].sort(key=lambda e: (e["workload"], e["run"] != "default", e["run"]))
    truths["wall_seconds"] = round(time.time() - start, 1)
    with open(os.path.join(a.outdir, "truths.json"), "w") as f:
        json.dump(truths, f, indent=2, sort_keys=True)
    failed = [f"{e['workload']}/{e['run']}" for e in truths["runs"] if "error" in e]
    print(f"truths.json: {len(truths['runs'])} runs, {len(failed)} failed {failed}, "
          f"{len(truths['skipped'])} skipped, {truths['wall_seconds']}s", flush=True)


if __name__ == "__main__":
    main()
