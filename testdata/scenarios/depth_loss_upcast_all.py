"""depth_loss_upcast_all: depth_loss_upcast recorded with stacks="all" (C++ frames
too), so the autograd thread's gradients name their node.

usage: python3 depth_loss_upcast_all.py OUTDIR
"""
import os
import runpy

os.environ["STACKS"] = "all"
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "depth_loss_upcast.py"), run_name="__main__")
