"""A healthy training loop: an MLP on fixed-size batches with AdamW. Its
memory is flat after the first step (optimizer state appears at step 1)."""
import torch

import _e2e as E


def build_model():
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(2048, 2048), torch.nn.GELU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(2048, 256)).cuda()


def train_step(model, opt, step):
    x = torch.randn(512, 2048, device="cuda")
    y = torch.randint(0, 256, (512,), device="cuda")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def main():
    a = E.args(__doc__, steps=8)
    model = build_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    timer = E.StepTimer(a)
    for step in range(1, a.steps + 1):
        with timer:
            loss = train_step(model, opt, step)
        E.log(f"[healthy] step {step}: loss {loss:.4f} allocated {torch.cuda.memory_allocated() / E.MiB:.1f} MiB")
    timer.write(program="healthy_train")


if __name__ == "__main__":
    main()
