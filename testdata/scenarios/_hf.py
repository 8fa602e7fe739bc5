"""Small random-weight HuggingFace Llama models for the depth_* scenarios.

The GPU machine has transformers but no network: models are built from a
LlamaConfig with random weights, never downloaded. Everything that differs
between transformers releases (the cache's layout, logits_to_keep) is looked up
with a fallback, so the scripts run on 4.4x and 5.x alike.

line_of() and source_line() give expected.json the truth about where things
are: the line of the scenario's own code and of the library's code that
allocates, read from the files that actually ran.
"""
import inspect
import os

import torch


def llama(vocab, hidden, layers, heads, kv_heads, intermediate, use_cache, ctx=4096, seed=0, dtype=torch.bfloat16):
    """A LlamaForCausalLM with random weights on cuda in dtype, and its config.

    use_cache sets the config's default: off for training and evaluation, so no
    forward keeps a DynamicCache the scenario did not ask for.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=ctx,
        tie_word_embeddings=False,
        use_cache=use_cache,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)  # built on the CPU: random init there, then moved once
    model = model.to(device="cuda", dtype=dtype)
    return model, cfg


def describe(model):
    import transformers

    return {
        "transformers_version": transformers.__version__,
        "model_class": type(model).__name__,
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
    }


def logits_kwargs(model, keep):
    """{'logits_to_keep': keep} (or the 4.4x name) when the model takes it, else {}."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return {}
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: keep}
    return {}


def line_of(path, text):
    """1-based number of the first line of path whose code starts with text."""
    try:
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if line.strip().startswith(text):
                    return i
    except OSError:
        return None
    return None


def source_line(func, text):
    """Where text sits inside func's source: {file, line, function, code}, or None."""
    if func is None:
        return None
    try:
        lines, start = inspect.getsourcelines(func)
        path = inspect.getsourcefile(func)
    except (OSError, TypeError):
        return None
    for i, line in enumerate(lines):
        if text in line:
            return {"file": path, "file_suffix": suffix(path), "line": start + i,
                    "function": func.__name__, "code": line.strip()}
    return None


def suffix(path):
    """The part of a library path from its package folder on: .../site-packages/transformers/x.py -> transformers/x.py."""
    if not path:
        return None
    parts = path.replace(os.sep, "/").split("/")
    for anchor in ("site-packages", "dist-packages"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) + 1:])
    return "/".join(parts[-3:])


def cache_layers(cache):
    """The (keys, values) tensors of each layer of a past_key_values, whatever its class or release."""
    layers = getattr(cache, "layers", None)
    if layers is not None:  # transformers 5: DynamicCache.layers[i].keys / .values
        return [(layer.keys, layer.values) for layer in layers if getattr(layer, "keys", None) is not None]
    if hasattr(cache, "key_cache"):  # transformers 4.4x
        return list(zip(cache.key_cache, cache.value_cache))
    if isinstance(cache, (tuple, list)):  # legacy tuples
        return [(kv[0], kv[1]) for kv in cache]
    return []


def cache_bytes(cache):
    total = 0
    for k, v in cache_layers(cache):
        if isinstance(k, torch.Tensor) and k.numel():
            total += k.numel() * k.element_size() + v.numel() * v.element_size()
    return total


def cache_tokens(cache):
    for k, _ in cache_layers(cache):
        if isinstance(k, torch.Tensor) and k.dim() >= 2:
            return int(k.shape[-2])
    return 0
