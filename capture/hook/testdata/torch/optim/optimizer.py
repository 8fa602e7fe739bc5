import torch

_post_hooks = {}


class _Handle:
    def __init__(self, key):
        self.key = key

    def remove(self):
        _post_hooks.pop(self.key, None)


def register_optimizer_step_post_hook(hook):
    torch._record("optim.register_optimizer_step_post_hook")
    key = len(_post_hooks) + 1000 * id(hook) % 997
    _post_hooks[key] = hook
    return _Handle(key)


class Optimizer:
    def step(self):
        for hook in list(_post_hooks.values()):
            hook(self, (), {})
