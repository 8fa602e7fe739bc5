"""oom_messages: real torch out-of-memory messages, one per cause, each raised in
a fresh process so that no case sees another's cache:

  exceeds      one request larger than the whole GPU             request_exceeds_device
  cap          set_per_process_memory_fraction(0.05), then 10%   memory_cap
  other        another process holds 70% of the GPU, we ask 50%  other_processes
  peak         1 GiB tensors kept until the GPU is full          peak
  frag         a 4 GiB segment carved into 100 MiB blocks, every
               other one freed (2 GiB of holes), then the GPU
               filled with 1 GiB tensors                         peak: the holes would
               have served this one request, but they are 2.6% of a 78 GiB reserve
               and the fill takes the GPU anyway (a fragmentation OOM under a cap
               is frag_oom)
  graphs       a CUDA graph keeps 2 GiB in its private pool, then
               the GPU filled with 1 GiB tensors                 peak (private pools shown)
  async        backend:cudaMallocAsync, twice the GPU            request_exceeds_device

Each case writes CASE.txt (the traceback as a user would paste it) and CASE.json
(the cause it was built to show, mem_get_info and memory_stats at the failure).

usage: python3 oom_messages.py OUTDIR [CASE]
"""
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
GiB = 1 << 30
MiB = 1 << 20
CASES = {
    "exceeds": "request_exceeds_device",
    "cap": "memory_cap",
    "other": "other_processes",
    "peak": "peak",
    "frag": "peak",
    "graphs": "peak",
    "async": "request_exceeds_device",
}


def fill(keep, chunk=GiB):
    import torch
    while True:
        keep.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))


def case_exceeds(torch, total, keep):
    keep.append(torch.empty(2 * total, dtype=torch.uint8, device="cuda"))


def case_cap(torch, total, keep):
    torch.cuda.set_per_process_memory_fraction(0.05)
    keep.append(torch.empty(total // 10, dtype=torch.uint8, device="cuda"))


def case_async(torch, total, keep):
    case_exceeds(torch, total, keep)


def case_other(torch, total, keep):
    ready = os.path.join(os.environ["OOM_OUT"], "other.ready")
    hog = subprocess.Popen([sys.executable, "-c", (
        "import torch,time,sys; t=torch.empty(int(%d*0.7),dtype=torch.uint8,device='cuda'); "
        "open(sys.argv[1],'w').close(); time.sleep(120)") % total, ready])
    try:
        for _ in range(600):
            if os.path.exists(ready):
                break
            time.sleep(0.1)
        keep.append(torch.empty(total // 2, dtype=torch.uint8, device="cuda"))
    finally:
        keep.append(hog)


def case_peak(torch, total, keep):
    fill(keep)


def case_frag(torch, total, keep):
    staging = torch.empty(4 * GiB, dtype=torch.uint8, device="cuda")
    del staging
    blocks = [torch.empty(100 * MiB, dtype=torch.uint8, device="cuda") for _ in range(40)]
    keep.extend(blocks[1::2])
    del blocks
    fill(keep)


def case_graphs(torch, total, keep):
    static_in = torch.zeros(GiB // 4, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        tmp = static_in * 2  # warm-up outside the graph
    torch.cuda.current_stream().wait_stream(s)
    del tmp
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        a = static_in * 2
        b = a + 1
        del a
    keep.extend([g, static_in, b])
    fill(keep)


def run_case(name, outdir):
    os.environ["OOM_OUT"] = outdir
    import torch
    total = torch.cuda.get_device_properties(0).total_memory
    keep = []
    facts = {"case": name, "expected_cause": CASES[name], "torch_version": torch.__version__,
             "device_name": torch.cuda.get_device_name(0), "total_memory": total,
             "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    text = ""
    try:
        globals()["case_" + name](torch, total, keep)
        text = "no error raised\n"
    except Exception as e:  # noqa: BLE001 - any OOM flavour is what we want
        text = traceback.format_exc()
        free, tot = torch.cuda.mem_get_info()
        stats = torch.cuda.memory_stats()
        facts.update({"exception": type(e).__name__, "mem_get_info_free": free,
                      "allocated": int(stats.get("allocated_bytes.all.current", 0)),
                      "reserved": int(stats.get("reserved_bytes.all.current", 0)),
                      "num_ooms": int(stats.get("num_ooms", 0))})
    for k in keep:
        if isinstance(k, subprocess.Popen):
            k.kill()
    with open(os.path.join(outdir, name + ".txt"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(facts, f, indent=2, sort_keys=True)
    print(f"[oom_messages] {name}: {text.strip().splitlines()[-1][:300] if text.strip() else ''}", flush=True)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "out", "oom_messages")
    os.makedirs(outdir, exist_ok=True)
    if len(sys.argv) > 2:
        run_case(sys.argv[2], outdir)
        return
    for name in CASES:
        env = dict(os.environ)
        if name == "async":
            env["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
        subprocess.run([sys.executable, __file__, outdir, name], env=env, timeout=240)


if __name__ == "__main__":
    main()
