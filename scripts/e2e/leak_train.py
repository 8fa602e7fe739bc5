"""A leaking training loop: compute_logits's output (16 MiB a step) is kept
in a list 'for logging', so live memory grows by 16 MiB every step."""
import torch

import _e2e as E

B, V = 512, 8192          # logits: 512 x 8192 fp32 = 16 MiB
LOGGED = []               # never drained: the leak


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.GELU(), torch.nn.Linear(2048, V)).cuda()


def compute_logits(model, x):
    return model(x)


def train_step(model, opt, step):
    x = torch.randn(B, 1024, device="cuda")
    y = torch.randint(0, V, (B,), device="cuda")
    logits = compute_logits(model, x)
    loss = torch.nn.functional.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    LOGGED.append(logits.detach())     # keeps 16 MiB alive per step
    return loss.item()


def main():
    a = E.args(__doc__, steps=8)
    model = build_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(1, a.steps + 1):
        loss = train_step(model, opt, step)
        E.log(f"[leak] step {step}: loss {loss:.4f} allocated {torch.cuda.memory_allocated() / E.MiB:.1f} MiB")


if __name__ == "__main__":
    main()
