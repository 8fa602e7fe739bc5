"""frag_oom: OOM caused by external fragmentation under a per-process budget.

A 3 GiB budget (set_per_process_memory_fraction). A 2 GiB weight-sync staging
buffer is allocated and freed (stays cached as one 2 GiB segment), then
KV blocks of varying sizes are carved out of it; every other one is freed,
leaving holes inside a segment that still holds live blocks (so the OOM path
cannot release it). Then allocate_logits_workspace() asks for 600 MiB: no hole
is big enough and a new segment would exceed the budget -> OutOfMemoryError,
although ~1.1 GiB is reserved but unallocated.

usage: python3 frag_oom.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=100_000, stacks="python")

import torch  # noqa: E402

MiB = C.MiB
GiB = C.GiB
BUDGET = 3 * GiB
WEIGHTS = 512 * MiB
STAGING = 2048 * MiB
KV_BLOCK_MIB = [96, 160, 64, 128, 192, 80, 144, 112, 176, 96, 128, 160, 64, 192]
REQUEST = 600 * MiB


def load_weights():
    return torch.empty(WEIGHTS, dtype=torch.uint8, device="cuda").fill_(1)


def stage_weight_update():
    buf = torch.empty(STAGING, dtype=torch.uint8, device="cuda")
    buf.fill_(2)                       # pretend: gather + copy new weights
    torch.cuda.synchronize()
    return int(buf[0].item())          # buf freed on return -> cached 2 GiB block


def allocate_kv_blocks():
    blocks = []
    for mib in KV_BLOCK_MIB:
        blocks.append(torch.empty(mib * MiB, dtype=torch.uint8, device="cuda"))
    return blocks


def release_finished_requests(blocks):
    # free every other block (finished requests); the rest stay live
    for i in range(0, len(blocks), 2):
        blocks[i] = None


def allocate_logits_workspace():
    return torch.empty(REQUEST, dtype=torch.uint8, device="cuda")


def main(name="frag_oom"):
    out = C.outdir_from_argv(name)
    total = torch.cuda.get_device_properties(0).total_memory
    fraction = BUDGET / total
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    weights = load_weights()
    stage_weight_update()
    blocks = allocate_kv_blocks()
    release_finished_requests(blocks)
    torch.cuda.synchronize()
    before = C.torch_numbers()
    oom_message = None
    ws = None
    try:
        ws = allocate_logits_workspace()
        ws.fill_(3)
    except torch.cuda.OutOfMemoryError as e:
        oom_message = str(e)
        print(f"[{name}] OOM message: {oom_message}", flush=True)
    live_mib = sum(m for i, m in enumerate(KV_BLOCK_MIB) if i % 2 == 1)
    hole_mib = [m for i, m in enumerate(KV_BLOCK_MIB) if i % 2 == 0]
    tail_mib = STAGING // MiB - sum(KV_BLOCK_MIB)
    extra = {
        "recording": REC,
        "per_process_memory_fraction": fraction,
        "budget_bytes": BUDGET,
        "oom_message": oom_message,
        "oom_raised": oom_message is not None,
        "before_request": {k: before[k] for k in C.STAT_KEYS},
    }
    nums = C.dump(os.path.join(out, f"{name}.pickle"), name, extra=extra)
    if oom_message is not None:
        with open(os.path.join(out, "oom_message.txt"), "w") as f:
            f.write(oom_message + "\n")
    expected = {
        "scenario": name,
        "verdict": "oom" if oom_message is not None else "healthy",
        "culprit_functions": ["allocate_logits_workspace"] if oom_message is not None else [],
        "fragmenting_functions": ["stage_weight_update", "allocate_kv_blocks", "release_finished_requests"],
        "oom_message": oom_message,
        "request_bytes": REQUEST,
        "budget_bytes": BUDGET,
        "per_process_memory_fraction": fraction,
        "layout": {
            "weights_bytes": WEIGHTS,
            "staging_segment_bytes": STAGING,
            "kv_blocks_mib_in_order": KV_BLOCK_MIB,
            "freed_every_other_from_index": 0,
            "live_kv_bytes": live_mib * MiB,
            "hole_bytes": [m * MiB for m in hole_mib] + [tail_mib * MiB],
            "largest_hole_bytes": max(hole_mib + [tail_mib]) * MiB,
            "expected_allocated_bytes": WEIGHTS + live_mib * MiB,
            "expected_reserved_bytes": WEIGHTS + STAGING,
            "expected_reserved_unallocated_bytes": (sum(hole_mib) + tail_mib) * MiB,
        },
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "allocated_bytes.all.current": nums["allocated_bytes.all.current"],
        "reserved_bytes.all.current": nums["reserved_bytes.all.current"],
        "num_ooms": nums["num_ooms"],
    }
    if os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        expected["note"] = ("expandable_segments variant: the same sequence; the 600 MiB request can "
                            "use the free tail plus newly mapped pages (and unmapped free pages), "
                            "so no OOM is expected")
    else:
        expected["note"] = ("holes live inside the 2 GiB staging segment that still has live KV blocks, "
                            "so the OOM retry (release_cached_blocks) frees nothing; the trace has an "
                            "'oom' event whose stack contains allocate_logits_workspace")
    C.write_json(os.path.join(out, "expected.json"), expected)
    del weights, blocks, ws


if __name__ == "__main__":
    main()
