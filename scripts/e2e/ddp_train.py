"""Two ranks on one GPU under torchrun (gloo for the collectives, since NCCL
refuses two ranks on one device). Rank 0 trains an MLP and is healthy;
rank 1 also caches a 16 MiB prompt embedding per step in a list that is
never evicted (cache_prompt_embeddings): a leak in one rank only."""
import os

import torch
import torch.distributed as dist

import _e2e as E

CACHE = []


def cache_prompt_embeddings(step):
    emb = torch.full((2048, 2048), float(step), device="cuda")    # 16 MiB fp32
    CACHE.append(emb)
    return emb


def train_step(model, opt, rank, step):
    x = torch.randn(256, 1024, device="cuda")
    if rank == 1:
        x = x + cache_prompt_embeddings(step)[:256, :1024]
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    t = torch.tensor([loss.item()])
    dist.all_reduce(t)                    # gloo, on the CPU
    return t.item()


def main():
    a = E.args(__doc__, steps=8)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.cuda.set_device(0)
    torch.manual_seed(rank)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 1024)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for step in range(1, a.steps + 1):
        loss = train_step(model, opt, rank, step)
        E.log(f"[ddp rank{rank} pid{os.getpid()}] step {step}: loss {loss:.4f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
