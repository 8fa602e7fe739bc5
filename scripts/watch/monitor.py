"""Watches `vramscope watch`'s /metrics beside leak.py and healthy.py for
scripts/watch-e2e.sh, asserts what the e2e promises, and writes
results.json and results.md.

Promises (the script's header states them too):
  * leak.py is flagged `leak` within WINDOW + 60 s of appearing on the GPU;
  * healthy.py is never flagged `leak`;
  * /metrics carries dcgm-exporter's DCGM_FI_DEV_FB_USED/FREE for the real
    GPU and vramscope_process_* for both processes;
  * with the capture hook (`vramscope record` in the binary), the leak's
    capture names keep_logits in leak.py (vramscope_process_finding_info)
    within WINDOW + 120 s, and `watch --dump PID` prints it too.
"""

import argparse
import json
import os
import re
import subprocess
import time
import urllib.request

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
MiB = 1 << 20


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        text = r.read().decode()
    series = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = LINE.match(line)
        if m:
            series.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return series


def cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def roles(seen):
    """Which seen process is leak.py and which healthy.py: by command line,
    or, when NVML's pids are not in this pid namespace (a container without
    the host's pids), by growth: leak.py's memory grows most."""
    procs = {}
    for p in seen.values():
        if "leak.py" in p["cmdline"]:
            procs["leak"] = p
        elif "healthy.py" in p["cmdline"]:
            procs["healthy"] = p
    unnamed = [p for p in seen.values() if not p["cmdline"] and len(p["used_mib"]) > 1]
    if len(procs) < 2 and len(unnamed) >= 2:
        unnamed.sort(key=lambda p: p["used_mib"][-1] - p["used_mib"][0])
        procs.setdefault("leak", dict(unnamed[-1], by_memory=True))
        procs.setdefault("healthy", dict(unnamed[0], by_memory=True))
    return procs


def cpu_seconds(pid):
    """User and system CPU seconds of pid, None once it has exited."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--window", type=float, required=True)
    ap.add_argument("--run", type=float, required=True)
    ap.add_argument("--watch-pid", type=int, required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--hook", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    t0 = time.time()
    cpu0 = cpu_seconds(a.watch_pid)
    seen = {}  # pid -> state, for every process that appears after the start
    failures = []
    unchecked = []
    checked = set()
    device = {}
    dump_text = None
    deadline = t0 + a.run + 45
    while time.time() < deadline:
        time.sleep(2)
        now = time.time() - t0
        try:
            series = scrape(a.port)
        except OSError as e:
            failures.append("scrape at %.0f s: %s" % (now, e))
            break
        for name, labels, value in series:
            if name == "DCGM_FI_DEV_FB_USED" and labels.get("UUID", "").startswith("GPU-"):
                checked.add(name)
                device = {"uuid": labels["UUID"], "model": labels.get("modelName"), "driver": labels.get("DCGM_FI_DRIVER_VERSION")}
            if name == "DCGM_FI_DEV_FB_FREE":
                checked.add(name)
            if not name.startswith("vramscope_process_"):
                continue
            checked.add(name)
            pid = int(labels["pid"])
            p = seen.setdefault(pid, {"pid": pid, "first_seen_s": round(now, 1), "cmdline": cmdline(pid), "verdicts": {},
                                      "flagged_after_s": None, "rate_mib_per_min": 0.0, "max_rate_mib_per_min": 0.0,
                                      "used_mib": [], "callsite": None})
            if name == "vramscope_process_verdict" and value == 1:
                v = labels["verdict"]
                p["verdicts"][v] = p["verdicts"].get(v, 0) + 1
                if v == "leak" and p["flagged_after_s"] is None:
                    p["flagged_after_s"] = round(now - p["first_seen_s"], 1)
            elif name == "vramscope_process_memory_growth_bytes_per_second":
                p["rate_mib_per_min"] = round(value * 60 / MiB, 1)
                p["max_rate_mib_per_min"] = max(p["max_rate_mib_per_min"], p["rate_mib_per_min"])
            elif name == "vramscope_process_memory_used_bytes":
                p["used_mib"].append(round(value / MiB))
            elif name == "vramscope_process_finding_info" and p["callsite"] is None:
                p["callsite"] = "%s at %s" % (labels.get("function"), labels.get("callsite"))
                p["captured_after_s"] = round(now - p["first_seen_s"], 1)
        procs = roles(seen)
        leak = procs.get("leak")
        if a.hook and leak and leak.get("callsite") and dump_text is None:
            # The on-demand path, once the automatic capture is in.
            r = subprocess.run([a.bin, "watch", "--dump", str(leak["pid"])], capture_output=True, text=True, timeout=90)
            dump_text = r.stdout + r.stderr
            with open(os.path.join(a.out, "dump.txt"), "w") as f:
                f.write(dump_text)
            leak["dump_exit"] = r.returncode
        if len(procs) == 2 and all(cmdline(p["pid"]) == "" for p in procs.values()) and now > a.run:
            break
    cpu1 = cpu_seconds(a.watch_pid)
    elapsed = time.time() - t0
    if cpu0 is None or cpu1 is None:
        failures.append("vramscope watch exited during the run (see watch.log)")
        cpu1 = cpu0 = 0
    cpu = cpu1 - cpu0
    procs = roles(seen)
    visible = all("by_memory" not in p for p in procs.values())

    leak, healthy = procs.get("leak"), procs.get("healthy")
    for role in ("leak", "healthy"):
        if role not in procs:
            failures.append("%s.py never appeared in /metrics" % role)
    for name in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "vramscope_process_memory_used_bytes",
                 "vramscope_process_memory_growth_bytes_per_second", "vramscope_process_verdict", "vramscope_process_leak"):
        if name not in checked:
            failures.append("/metrics lacks %s for the real GPU or the two processes" % name)
    limit = a.window + 60
    if leak:
        if leak["flagged_after_s"] is None:
            failures.append("leak.py was never flagged in %.0f s" % elapsed)
        elif leak["flagged_after_s"] > limit:
            failures.append("leak.py flagged after %.0f s, over %.0f s" % (leak["flagged_after_s"], limit))
        if len(leak["used_mib"]) > 2 and leak["used_mib"][-1] <= leak["used_mib"][0]:
            failures.append("leak.py's used memory did not grow: %s" % leak["used_mib"][:3])
        if a.hook and not visible:
            unchecked.append("the capture: the GPU's pids are not in this pid namespace, so watch cannot signal the"
                             " process or read its folder (run with the host's pids, as the DaemonSet does)")
        elif a.hook:
            if not leak.get("callsite") or "leak.py" not in leak["callsite"] or "keep_logits" not in leak["callsite"]:
                failures.append("no capture naming keep_logits in leak.py: %s" % leak.get("callsite"))
            elif leak.get("captured_after_s", 1e9) > a.window + 120:
                failures.append("capture came %.0f s after the leak appeared" % leak["captured_after_s"])
            if dump_text is not None and ("keep_logits" not in dump_text or leak.get("dump_exit") != 0):
                failures.append("watch --dump exited %s without keep_logits" % leak.get("dump_exit"))
    if healthy and healthy["verdicts"].get("leak"):
        failures.append("healthy.py was called a leak %d times" % healthy["verdicts"]["leak"])
    for p in procs.values():
        p["used_mib_first_last"] = [p["used_mib"][0], p["used_mib"][-1]] if p["used_mib"] else []
        del p["used_mib"]
        del p["cmdline"]

    res = {
        "pass": not failures, "failures": failures, "not_checked": unchecked, "elapsed_s": round(elapsed, 1), "window_s": a.window,
        "leak_deadline_s": limit, "device": device, "hook": bool(a.hook),
        "watch_cpu_percent_of_a_core": round(100 * cpu / elapsed, 3), "leak": leak, "healthy": healthy,
        "metrics_checked": sorted(checked), "pids_visible": visible,
    }
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=2, sort_keys=True)
    md = ["# vramscope watch on a GPU (scripts/watch-e2e.sh)", "",
          "%s: %s" % ("PASS" if res["pass"] else "FAIL", "; ".join(failures) or "every promise checked held"), "",
          *(["not checked: " + u for u in unchecked] + [""] if unchecked else []),
          "- device: %s (%s), driver %s" % (device.get("model"), device.get("uuid"), device.get("driver")),
          "- verdict window %.0f s; leak deadline %.0f s after the process appears" % (a.window, limit),
          "- watch's CPU: %.3f %% of a core at 1 Hz over %.0f s" % (res["watch_cpu_percent_of_a_core"], elapsed)]
    for role, p in (("leak.py", leak), ("healthy.py", healthy)):
        if p:
            md.append("- %s (pid %d): flagged after %s s; verdicts seen %s; growth %.1f MiB/min (max %.1f); used %s MiB%s" % (
                role, p["pid"], p["flagged_after_s"], p["verdicts"], p["rate_mib_per_min"], p["max_rate_mib_per_min"],
                " -> ".join(map(str, p["used_mib_first_last"])),
                "; capture: %s after %s s" % (p["callsite"], p.get("captured_after_s")) if p.get("callsite") else ""))
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    raise SystemExit(0 if res["pass"] else 1)


if __name__ == "__main__":
    main()
