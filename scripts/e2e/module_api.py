"""The hook as a module (vramscope hook --write DIR; PYTHONPATH=DIR): an
inference loop with no optimizer marks its steps with step(n), dumps once by
hand, and records a second phase inside capture(). usage: module_api.py OUT"""
import sys

import torch
import vramscope_hook

import _e2e as E


@torch.no_grad()
def decode(model, cache, n):
    x = torch.randn(32, 1024, device="cuda")
    cache.append(model(x))               # a KV cache that grows by design
    return cache[-1].sum().item()


def main():
    out = sys.argv[1]
    vramscope_hook.start(out=out, steps=[2, 3, 4], tag="decoder")
    model = torch.nn.Linear(1024, 1024).cuda()
    cache = []
    for n in range(1, 6):
        decode(model, cache, n)
        vramscope_hook.step(n)
    E.log("[module] manual dump:", vramscope_hook.dump("after decode"))
    vramscope_hook.stop()
    with vramscope_hook.capture(out=out + "/phase2", tag="phase2"):
        decode(model, cache, 6)


if __name__ == "__main__":
    main()
