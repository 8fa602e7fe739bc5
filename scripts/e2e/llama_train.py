"""A tiny Llama (transformers' LlamaForCausalLM from a LlamaConfig, random
weights, nothing downloaded) trained on random tokens with AdamW: healthy,
and the allocation pattern of a real model for the overhead numbers."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import _e2e as E


def build_model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1408, num_hidden_layers=6,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=1024)
    return LlamaForCausalLM(cfg).cuda()


def train_step(model, opt):
    ids = torch.randint(0, 4096, (8, 512), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss
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
            loss = train_step(model, opt)
        E.log(f"[llama] step {step}: loss {loss:.4f} allocated {torch.cuda.memory_allocated() / E.MiB:.1f} MiB")
    timer.write(program="llama_train")


if __name__ == "__main__":
    main()
