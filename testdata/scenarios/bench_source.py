"""bench_source: a longer, realistic run (tiny GPT-style transformer, AdamW,
periodic eval) recorded with stacks="python" and a large ring buffer, as the seed
for a ~1 GB benchmark file. Dumps when the trace holds >= ~150k events
(bench_source_150k.pickle) and again at >= ~300k events (bench_source.pickle).
Healthy: no leak, no fragmentation problem.

usage: python3 bench_source.py OUTDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

MAX_ENTRIES = 1_000_000
REC = C.start_recording(max_entries=MAX_ENTRIES, stacks="python")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB = 8192
D = 256
HEADS = 4
LAYERS = 4
SEQ = 128
BATCH = 16
EVAL_EVERY = 50
TARGETS = [(150_000, "bench_source_150k.pickle"), (300_000, "bench_source.pickle")]
MAX_STEPS = 5000


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))

    def mlp(self, x):
        return self.fc2(F.gelu(self.fc1(x)))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(SEQ, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def get_batch(g, batch=BATCH):
    idx = torch.randint(0, VOCAB, (batch, SEQ + 1), device="cuda", generator=g)
    return idx[:, :-1], idx[:, 1:]


def train_step(model, opt, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


@torch.no_grad()
def evaluate(model, g):
    x, y = get_batch(g, batch=4 * BATCH)
    logits = model(x)
    return F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))


def approx_events():
    s = torch.cuda.memory_stats()
    # alloc + free_requested + free_completed per allocation, plus segment events
    return 3 * s.get("allocation.all.allocated", 0) + s.get("num_device_alloc", 0) + s.get("num_device_free", 0)


def main(name="bench_source"):
    out = C.outdir_from_argv(name)
    torch.manual_seed(0)
    model = TinyGPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    g = torch.Generator(device="cuda").manual_seed(0)
    targets = list(TARGETS)
    step = 0
    dumps = []
    losses = []
    while targets and step < MAX_STEPS:
        step += 1
        with torch.autograd.profiler.record_function(f"train_step#{step}"):
            x, y = get_batch(g)
            loss = train_step(model, opt, x, y)
            del x, y
        if step % EVAL_EVERY == 0:
            with torch.autograd.profiler.record_function(f"eval#{step}"):
                ev = float(evaluate(model, g))
            losses.append((step, float(loss), ev))
            print(f"[{name}] step {step}: loss={float(loss):.4f} eval={ev:.4f} approx_events={approx_events()}", flush=True)
        del loss
        if approx_events() >= targets[0][0]:
            torch.cuda.synchronize()
            target, fname = targets.pop(0)
            nums = C.dump(os.path.join(out, fname), name,
                          extra={"recording": REC, "step": step, "approx_trace_events": approx_events(),
                                 "target_events": target})
            dumps.append({"file": fname, "step": step, "pickle_bytes": nums["pickle_bytes"],
                          "approx_trace_events": nums["approx_trace_events"]})
    C.write_json(os.path.join(out, "expected.json"), {
        "scenario": name,
        "verdict": "healthy",
        "culprit_functions": [],
        "model": {"vocab": VOCAB, "d": D, "heads": HEADS, "layers": LAYERS, "seq": SEQ, "batch": BATCH},
        "step_annotation": "train_step#N (eval#N every %d steps)" % EVAL_EVERY,
        "max_entries": MAX_ENTRIES,
        "dumps": dumps,
        "losses": losses,
        "note": "seed for the ~1 GB benchmark; the trace never wraps (max_entries=%d)" % MAX_ENTRIES,
    })


if __name__ == "__main__":
    main()
