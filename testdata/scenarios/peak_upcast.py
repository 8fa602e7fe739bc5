"""peak_upcast: one `.float()` upcast of a [N x V] bf16 logits matrix followed by
log_softmax makes a multi-GiB transient peak (seed 002, SGLang #6318).

Recording starts at process start, before any CUDA allocation. The culprit is
compute_logprobs(): `logits.float()` (fp32 copy, N*V*4 bytes) and
`torch.log_softmax` (another N*V*4 bytes) are live together with the bf16 logits.

usage: python3 peak_upcast.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402  (imports torch, no CUDA yet)

REC = C.start_recording(max_entries=100_000, stacks="python")

import torch  # noqa: E402

N = 2000      # tokens whose logprobs are requested
V = 150000    # vocab
H = 1024      # hidden


def build_model():
    g = torch.Generator(device="cuda").manual_seed(0)
    emb = torch.randn(V, H, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
    w1 = torch.randn(H, H, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
    return emb, w1


def model_forward(emb, w1, input_ids):
    h = emb[input_ids]                      # [N, H]
    h = torch.nn.functional.gelu(h @ w1)    # [N, H]
    logits = torch.nn.functional.linear(h, emb)  # tied lm_head -> [N, V] bf16
    return logits


def compute_logprobs(logits, target_ids):
    logits = logits.float()                          # [N, V] fp32: N*V*4 bytes
    logprobs = torch.log_softmax(logits, dim=-1)     # [N, V] fp32: N*V*4 bytes
    return logprobs.gather(-1, target_ids.unsqueeze(-1)).squeeze(-1)


def main():
    out = C.outdir_from_argv("peak_upcast")
    emb, w1 = build_model()
    input_ids = torch.randint(0, V, (N,), device="cuda")
    target_ids = torch.randint(0, V, (N,), device="cuda")
    with torch.inference_mode():
        with torch.autograd.profiler.record_function("## forward ##"):
            logits = model_forward(emb, w1, input_ids)
        with torch.autograd.profiler.record_function("## compute_logprobs ##"):
            lp = compute_logprobs(logits, target_ids)
        del logits
        lp_sum = float(lp.sum())
    nums = C.dump(os.path.join(out, "peak_upcast.pickle"), "peak_upcast",
                  extra={"recording": REC, "logprob_sum": lp_sum})
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": "peak_upcast",
        "verdict": "peak",
        "culprit_functions": ["compute_logprobs"],
        "culprit_ops": ["logits.float()", "torch.log_softmax"],
        "model_functions": ["model_forward", "build_model"],
        "shapes": {"N": N, "V": V, "H": H},
        "bytes": {
            "logits_bf16": N * V * 2,
            "logits_fp32_upcast": N * V * 4,
            "log_softmax_fp32": N * V * 4,
            "weights_bf16": V * H * 2 + H * H * 2,
        },
        "expected_peak_lower_bound": N * V * 2 + 2 * N * V * 4 + V * H * 2,
        "max_memory_allocated": nums["max_memory_allocated"],
        "note": "recording starts before any CUDA allocation; the peak happens inside compute_logprobs with the bf16 logits, the fp32 copy and the log_softmax output live at once",
    })


if __name__ == "__main__":
    main()
