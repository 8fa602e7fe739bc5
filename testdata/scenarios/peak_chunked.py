"""peak_chunked: the fix for peak_upcast (seed 002): logprobs computed in row
chunks, so only CHUNK x V fp32 temporaries are live at any time.

usage: python3 peak_chunked.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=100_000, stacks="python")

import torch  # noqa: E402

N = 2000
V = 150000
H = 1024
CHUNK = 250


def build_model():
    g = torch.Generator(device="cuda").manual_seed(0)
    emb = torch.randn(V, H, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
    w1 = torch.randn(H, H, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
    return emb, w1


def model_forward(emb, w1, input_ids):
    h = emb[input_ids]
    h = torch.nn.functional.gelu(h @ w1)
    logits = torch.nn.functional.linear(h, emb)
    return logits


def compute_logprobs_chunked(logits, target_ids, chunk=CHUNK):
    out = torch.empty(logits.shape[0], device=logits.device, dtype=torch.float32)
    for s in range(0, logits.shape[0], chunk):
        e = min(s + chunk, logits.shape[0])
        part = logits[s:e].float()                    # [chunk, V] fp32
        part = torch.log_softmax(part, dim=-1)        # [chunk, V] fp32
        out[s:e] = part.gather(-1, target_ids[s:e].unsqueeze(-1)).squeeze(-1)
        del part
    return out


def main():
    out = C.outdir_from_argv("peak_chunked")
    emb, w1 = build_model()
    input_ids = torch.randint(0, V, (N,), device="cuda")
    target_ids = torch.randint(0, V, (N,), device="cuda")
    with torch.inference_mode():
        with torch.autograd.profiler.record_function("## forward ##"):
            logits = model_forward(emb, w1, input_ids)
        with torch.autograd.profiler.record_function("## compute_logprobs ##"):
            lp = compute_logprobs_chunked(logits, target_ids)
        del logits
        lp_sum = float(lp.sum())
    nums = C.dump(os.path.join(out, "peak_chunked.pickle"), "peak_chunked",
                  extra={"recording": REC, "logprob_sum": lp_sum})
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": "peak_chunked",
        "verdict": "healthy",
        "fix_of": "peak_upcast",
        "culprit_functions": [],
        "largest_transient_functions": ["model_forward", "compute_logprobs_chunked"],
        "shapes": {"N": N, "V": V, "H": H, "CHUNK": CHUNK},
        "bytes": {
            "logits_bf16": N * V * 2,
            "chunk_fp32": CHUNK * V * 4,
            "weights_bf16": V * H * 2 + H * H * 2,
        },
        "max_memory_allocated": nums["max_memory_allocated"],
        "note": "same logprobs as peak_upcast (same seeds) but the peak is the bf16 logits + 2 fp32 chunks; compare max_memory_allocated with peak_upcast",
    })


if __name__ == "__main__":
    main()
