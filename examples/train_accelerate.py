"""Hugging Face Accelerate on the dynamiccl backend: a small DDP job on CPU ranks.

    torchrun --standalone --nproc-per-node=4 examples/train_accelerate.py [--steps 100]
    accelerate launch --cpu --num_processes 4 examples/train_accelerate.py

Accelerate picks gloo by name for CPU training and creates the default group only if none
exists, so the job creates it first with ``init_process_group("dynamiccl")``; ``Accelerator`` then
trains on that group (DDP through ``accelerator.prepare``). On GPUs, name the backend instead:
``PartialState(backend="dynamiccl")`` before creating the ``Accelerator``.
"""

import argparse
import os

import torch
import torch.distributed as dist

import dynamiccl_pg


def train(steps: int, seed: int = 0):
    """Trains on the existing default group; returns the final parameters and the losses."""
    from accelerate import Accelerator

    # Accelerate reads the launcher's variables to know it is distributed on CPU.
    os.environ.setdefault("RANK", str(dist.get_rank()))
    os.environ.setdefault("WORLD_SIZE", str(dist.get_world_size()))
    os.environ.setdefault("LOCAL_RANK", str(dist.get_rank()))
    os.environ.setdefault("LOCAL_WORLD_SIZE", str(dist.get_world_size()))
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    g = torch.Generator().manual_seed(seed + 1 + dist.get_rank())
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        accelerator.backward(loss)
        optimizer.step()
        losses.append(loss.item())
    params = [p.detach().clone() for p in accelerator.unwrap_model(model).parameters()]
    return params, losses


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--backend", default="dynamiccl", help="dynamiccl (default) or gloo")
    args = p.parse_args()
    dist.init_process_group(args.backend)
    _, losses = train(args.steps)
    if dist.get_rank() == 0:
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {args.steps} steps")
        if args.backend == "dynamiccl":
            print(dynamiccl_pg.format_summary())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
