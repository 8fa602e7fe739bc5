"""train_deep_leak: train_deep where each iteration keeps a view of its logits.

usage: python3 train_deep_leak.py OUTDIR
"""
import os
import runpy

os.environ["LEAK"] = "1"
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_deep.py"), run_name="__main__")
