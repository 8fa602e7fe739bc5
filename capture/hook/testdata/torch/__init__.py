"""The smallest stand-in for torch that vramscope_hook touches, for tests
without torch. It records every call the hook makes in `calls` (and, when
FAKE_TORCH_LOG names a file, appends them to it as JSON lines), and lets a
test drive what torch would do: cuda.init() runs the lazy-init callbacks,
cuda.alloc(n) allocates, cuda.oom(n) runs the OOM observers and raises, and
optim.Optimizer().step() runs the global step hooks."""
import json
import os

__version__ = "0.0-fake"

calls = []


def _record(name, *args, **kwargs):
    calls.append((name, args, kwargs))
    log = os.environ.get("FAKE_TORCH_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps([name, [repr(a) for a in args], {k: repr(v) for k, v in kwargs.items()}]) + "\n")


from . import cuda, distributed, nn, optim, _C  # noqa: E402,F401
