"""leak_closure: SGLang overlap-scheduler leak (seed 000, sglang #20640/#20697).

Each scheduler step allocates a grammar vocab bitmask (allocate_vocab_mask) and
fp32 next-token logits (compute_next_token_logits). Sampling is deferred into a
closure (delay_sample_func) that captures forward_batch and logits_output; the
batch result is appended to result_queue, which is never drained, so every
step leaks one vocab mask + one fp32 logits tensor.

Snapshots at the end of steps 2, 3, 4: OUTDIR/step<N>/server_rank0_pid<PID>.pickle

usage: python3 leak_closure.py OUTDIR
"""
import os
import sys
from collections import deque

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

REC = C.start_recording(max_entries=100_000, stacks="python")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

B = 64            # running requests per decode step
V = 152064        # vocab (Qwen2)
H = 1024
MASK_WORDS = (V + 31) // 32
KV_POOL_BYTES = 512 * C.MiB
STEPS = 5
DUMP_STEPS = (2, 3, 4)
TAG = "server"


class SamplingInfo:
    def __init__(self, vocab_mask):
        self.vocab_mask = vocab_mask


class ForwardBatch:
    def __init__(self, step, sampling_info):
        self.step = step
        self.sampling_info = sampling_info


class LogitsOutput:
    def __init__(self, next_token_logits):
        self.next_token_logits = next_token_logits


class BatchResult:
    def __init__(self, logits_output, delay_sample_func):
        self.logits_output = logits_output
        self.delay_sample_func = delay_sample_func
        self.next_token_ids = None


def load_model():
    g = torch.Generator(device="cuda").manual_seed(0)
    emb = torch.randn(V, H, device="cuda", dtype=torch.bfloat16, generator=g)
    w1 = torch.randn(H, H, device="cuda", dtype=torch.bfloat16, generator=g)
    return emb, w1


def init_kv_cache_pool():
    return torch.zeros(KV_POOL_BYTES // 2, device="cuda", dtype=torch.bfloat16)


def allocate_vocab_mask(batch_size):
    # xgrammar-style int32 bitmask, one bit per token
    mask = torch.empty(batch_size, MASK_WORDS, device="cuda", dtype=torch.int32)
    mask.random_()                       # grammar fills allowed tokens
    return mask


def compute_next_token_logits(hidden, lm_head):
    logits = F.linear(hidden, lm_head)   # [B, V] bf16 (transient)
    return logits.float()                # [B, V] fp32, B*V*4 bytes


def model_forward(emb, w1, input_ids):
    h = emb[input_ids]
    return F.gelu(h @ w1) * 0.03


def apply_logits_bias(logits, vocab_mask):
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    bits = (vocab_mask.unsqueeze(-1) >> shifts) & 1
    allowed = bits.bool().reshape(vocab_mask.shape[0], -1)[:, : logits.shape[1]]
    logits.masked_fill_(~allowed, float("-inf"))


def sample(logits):
    probs = torch.softmax(logits, dim=-1)
    return torch.argmax(probs, dim=-1)


def forward_batch_generation(model, forward_batch, input_ids):
    emb, w1 = model
    hidden = model_forward(emb, w1, input_ids)
    logits_output = LogitsOutput(compute_next_token_logits(hidden, emb))

    def delay_sample_func():
        apply_logits_bias(logits_output.next_token_logits,
                          forward_batch.sampling_info.vocab_mask)
        return sample(logits_output.next_token_logits)

    return BatchResult(logits_output, delay_sample_func)


def event_loop_overlap(out, name, fixed):
    model = load_model()
    kv_pool = init_kv_cache_pool()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    result_queue = deque()
    per_step = []
    for step in range(1, STEPS + 1):
        with torch.autograd.profiler.record_function(f"event_loop_step#{step}"):
            input_ids = torch.randint(0, V, (B,), device="cuda")
            forward_batch = ForwardBatch(step, SamplingInfo(allocate_vocab_mask(B)))
            batch_result = forward_batch_generation(model, forward_batch, input_ids)
            result_queue.append((forward_batch, batch_result))
            next_ids = batch_result.delay_sample_func()
            batch_result.next_token_ids = next_ids.tolist()    # copy_to_cpu
            del next_ids, input_ids
            if fixed:
                # the fix from sglang #20697: drop GPU references once sampled
                forward_batch.sampling_info.vocab_mask = None
                batch_result.delay_sample_func = None
                batch_result.logits_output.next_token_logits = None
            del forward_batch, batch_result
        torch.cuda.synchronize()
        a = torch.cuda.memory_allocated()
        per_step.append({"step": step, "memory_allocated": a,
                         "memory_reserved": torch.cuda.memory_reserved(),
                         "above_base": a - base})
        print(f"[{name}] step {step}: allocated={a} above_base={a - base} "
              f"reserved={torch.cuda.memory_reserved()}", flush=True)
        if step in DUMP_STEPS:
            C.dump(C.step_snapshot_path(out, step, TAG), name,
                   extra={"recording": REC, "step": step, "tag": TAG,
                          "base_allocated_bytes": base, "queue_len": len(result_queue)})
    return base, per_step, kv_pool, model, result_queue


def main(name="leak_closure", fixed=False):
    out = C.outdir_from_argv(name)
    base, per_step, *_keep = event_loop_overlap(out, name, fixed)
    logits_bytes = B * V * 4
    mask_bytes = B * MASK_WORDS * 4
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "healthy" if fixed else "leak",
        "culprit_functions": [] if fixed else ["compute_next_token_logits", "allocate_vocab_mask"],
        "retained_by": None if fixed else "delay_sample_func closure kept in result_queue (event_loop_overlap / forward_batch_generation)",
        "leaked_tensors_per_step": [] if fixed else [
            {"function": "compute_next_token_logits", "what": "fp32 next_token_logits [B, V]", "bytes": logits_bytes},
            {"function": "allocate_vocab_mask", "what": "int32 vocab bitmask [B, ceil(V/32)]", "bytes": mask_bytes},
        ],
        "leak_bytes_per_step": 0 if fixed else logits_bytes + mask_bytes,
        "shapes": {"B": B, "V": V, "H": H, "MASK_WORDS": MASK_WORDS},
        "steps": STEPS,
        "dump_steps": list(DUMP_STEPS),
        "snapshot_layout": f"step<N>/{TAG}_rank0_pid<PID>.pickle",
        "base_allocated_bytes": base,
        "per_step": per_step,
        "fix_of": "leak_closure" if fixed else None,
    })


if __name__ == "__main__":
    main()
