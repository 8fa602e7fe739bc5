"""frag_growth_emptycache: frag_growth with torch.cuda.empty_cache() at the end of
every step (the seed-001 fix). Same code path (frag_growth.py).

usage: python3 frag_growth_emptycache.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frag_growth  # noqa: E402  (starts recording on import)

if __name__ == "__main__":
    frag_growth.main("frag_growth_emptycache", empty_cache_each_step=True)
