import torch

_observers = []


def _cuda_attach_out_of_memory_observer(fn):
    torch._record("_C._cuda_attach_out_of_memory_observer")
    _observers.append(fn)
