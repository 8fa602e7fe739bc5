"""forward_deep_mixed: forward_deep with 48 layers under bf16 autocast.

usage: python3 forward_deep_mixed.py OUTDIR
"""
import os
import runpy
import sys

os.environ["MIXED"] = "1"
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "forward_deep.py"), run_name="__main__")
