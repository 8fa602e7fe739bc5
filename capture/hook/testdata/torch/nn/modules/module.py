"""nn.Module's global forward hooks, as torch runs them: pre-hooks before
forward, post-hooks after it (with always_call, also when it raises)."""
import torch

_pre, _post = {}, {}


class _Handle:
    def __init__(self, table, key):
        self.table, self.key = table, key

    def remove(self):
        self.table.pop(self.key, None)


def register_module_forward_pre_hook(hook):
    torch._record("nn.register_module_forward_pre_hook")
    _pre[id(hook)] = hook
    return _Handle(_pre, id(hook))


def register_module_forward_hook(hook, *, always_call=False):
    torch._record("nn.register_module_forward_hook", always_call=always_call)
    _post[id(hook)] = (hook, always_call)
    return _Handle(_post, id(hook))


class Module:
    def __init__(self, **children):
        self._children = dict(children)

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._children.items():
            yield from child.named_modules(prefix + ("." if prefix else "") + name)

    def __getattr__(self, name):
        children = self.__dict__.get("_children", {})
        if name in children:
            return children[name]
        raise AttributeError(name)

    def forward(self, x):
        return x

    def __call__(self, x):
        for hook in list(_pre.values()):
            hook(self, (x,))
        try:
            out = self.forward(x)
        except BaseException:
            for hook, always in list(_post.values()):
                if always:
                    hook(self, (x,), None)
            raise
        for hook, _ in list(_post.values()):
            hook(self, (x,), out)
        return out
