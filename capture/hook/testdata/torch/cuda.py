import os
import pickle

import torch

_initialized = False
_queued = []
_allocated = 0
_reserved = 0
_history = None
_metadata = ""
tags = []  # per alloc(), the metadata it was made under


class OutOfMemoryError(RuntimeError):
    pass


def _lazy_call(fn, **kwargs):
    if _initialized:
        fn()
    else:
        _queued.append(fn)


def is_initialized():
    return _initialized


def init():
    """What torch.cuda._lazy_init does: initialize, then run the queued calls."""
    global _initialized
    if _initialized:
        return
    torch._record("cuda.init")
    for fn in _queued:
        fn()
    _initialized = True


def alloc(n):
    global _allocated, _reserved
    init()
    _allocated += n
    _reserved = max(_reserved, _allocated)
    if _history is not None:
        _history.append(("alloc", n))
    tags.append(_metadata)


def free(n):
    global _allocated
    _allocated -= n
    if _history is not None:
        _history.append(("free", n))


def oom(n):
    """An allocation of n bytes that does not fit: observers, then the error."""
    init()
    if _history is not None:
        _history.append(("oom", n))
    for obs in list(torch._C._observers):
        obs(0, n, _allocated, 1 << 20)
    raise OutOfMemoryError(
        "CUDA out of memory. Tried to allocate %.2f MiB. GPU 0 has a total capacity of 79.19 GiB "
        "of which 1.00 MiB is free. Of the allocated memory %.2f MiB is allocated by PyTorch, "
        "and 0 bytes is reserved by PyTorch but unallocated." % (n / 2**20, _allocated / 2**20))


def memory_allocated(device=None):
    return _allocated


def memory_reserved(device=None):
    return _reserved


def memory_summary(device=None, abbreviated=False):
    torch._record("cuda.memory_summary", abbreviated=abbreviated)
    return "|  PyTorch CUDA memory summary, device ID 0  |\n| Allocated memory | %d |" % _allocated


class _Memory:
    @staticmethod
    def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=0):
        global _history
        torch._record("cuda.memory._record_memory_history", enabled=enabled, context=context,
                      stacks=stacks, max_entries=max_entries)
        _history = [] if enabled else None

    @staticmethod
    def _set_memory_metadata(md):
        """torch >= 2.10: tags the allocations that follow on this thread.
        Each alloc() records the tag it was made under."""
        global _metadata
        torch._record("cuda.memory._set_memory_metadata", md)
        _metadata = md

    @staticmethod
    def _dump_snapshot(filename):
        torch._record("cuda.memory._dump_snapshot", filename)
        with open(filename, "wb") as f:
            # The shape of a real snapshot, empty: vramscope reads it.
            pickle.dump({"segments": [], "device_traces": [[]]}, f, protocol=4)


memory = _Memory()


if os.environ.get("FAKE_TORCH_NO_METADATA"):  # torch before 2.10
    del _Memory._set_memory_metadata
