"""frag_growth_expandable: frag_growth with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. Same code path (frag_growth.py).

usage: python3 frag_growth_expandable.py OUTDIR
"""
import os
import sys

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frag_growth  # noqa: E402  (starts recording on import)

if __name__ == "__main__":
    frag_growth.main("frag_growth_expandable")
