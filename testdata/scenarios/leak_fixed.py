"""leak_fixed: leak_closure with the fix (sglang #20697): after sampling,
vocab_mask, delay_sample_func and next_token_logits are set to None, so the
queued batch results hold no GPU memory. Same code path (leak_closure.py), same
dump layout.

usage: python3 leak_fixed.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import leak_closure  # noqa: E402  (starts recording on import)

if __name__ == "__main__":
    leak_closure.main("leak_fixed", fixed=True)
