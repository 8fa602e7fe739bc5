"""frag_oom_expandable: frag_oom with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
(the fix suggested by the OOM message). Same code, runs frag_oom.main().

usage: python3 frag_oom_expandable.py OUTDIR
"""
import os
import sys

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frag_oom  # noqa: E402  (starts recording on import)

if __name__ == "__main__":
    frag_oom.main("frag_oom_expandable")
