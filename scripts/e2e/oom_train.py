"""A training loop that runs out of memory: under a 2 GiB budget
(set_per_process_memory_fraction), build_attention_scores asks for a
[batch, heads, seq, seq] fp32 tensor for a sequence that doubles every
step (0.125, 0.5, then 2 GiB): at step 3 it no longer fits. The error is not caught: the program exits
with status 1, as a real job would."""
import torch

import _e2e as E

BUDGET = 2 << 30


def build_attention_scores(q, k):
    return q @ k.transpose(-1, -2)       # [B, H, S, S]


def train_step(model, opt, step):
    seq = 1024 << (step - 1)             # 1k, 2k, 4k ... tokens
    x = torch.randn(4, seq, 256, device="cuda")
    h = model(x).view(4, seq, 8, 32).transpose(1, 2)
    scores = build_attention_scores(h, h)
    loss = scores.float().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def main():
    a = E.args(__doc__, steps=6)
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(BUDGET / total, 0)
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(1, a.steps + 1):
        loss = train_step(model, opt, step)
        E.log(f"[oom] step {step}: loss {loss:.4f} allocated {torch.cuda.memory_allocated() / E.MiB:.1f} MiB")


if __name__ == "__main__":
    main()
