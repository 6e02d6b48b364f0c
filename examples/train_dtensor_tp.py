"""Tensor parallelism with DTensor (torch.distributed.tensor.parallel) on "dynamiccl", CPU.

    torchrun --standalone --nproc-per-node=4 examples/train_dtensor_tp.py [--steps 40]

Each MLP block is split over a one-dimensional "tp" mesh with parallelize_module: the
up-projection column-wise, the down-projection row-wise, and the activations between blocks
sharded along the sequence (sequence parallel). DTensor sends that traffic through functional
collectives — all-gathers and reduce-scatters into tensors, which reach the backend as coalesced
calls — so this is the tensor-parallel traffic the "tp" head tunes. A mesh over the whole world
is the default group (a sub-mesh would be named "mesh_tp" and get its role from that), so the
step runs under dynamiccl_pg.hint(role="tp"). Every rank sees the same batch: tensor
parallelism splits the model, not the data.
"""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               SequenceParallel, parallelize_module)

import dynamiccl_pg
from dynamiccl_pg.backend import backend_of


class Block(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--depth", type=int, default=4)
    args = parser.parse_args()

    dist.init_process_group("dynamiccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.seq % world or (4 * args.width) % world:
        raise SystemExit(f"--seq {args.seq} and 4 x --width {args.width} must divide by the "
                         f"{world} ranks")
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    torch.manual_seed(0)  # the same full model on every rank before it is split
    model = torch.nn.Sequential(*(Block(args.width) for _ in range(args.depth)))
    for block in model:
        parallelize_module(block, mesh, {
            "norm": SequenceParallel(),
            "up": ColwiseParallel(input_layouts=Shard(1)),
            "down": RowwiseParallel(output_layouts=Shard(1)),
        })
    optim = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000)  # one data stream, the same on every rank
    target_proj = torch.randn(args.width, args.width, generator=data) / args.width ** 0.5
    seq_shard = args.seq // world
    for step in range(args.steps):
        x = torch.randn(args.batch, args.seq, args.width, generator=data)
        y = x @ target_proj
        mine = slice(rank * seq_shard, (rank + 1) * seq_shard)  # the input enters sharded
        # CPU autograd runs backward on this thread; the replicated LayerNorm's partial gradients
        # are all-reduced when the optimizer reads them.
        with dynamiccl_pg.hint(role="tp"):
            out = model(x[:, mine])
            loss = torch.nn.functional.mse_loss(out, y[:, mine])
            optim.zero_grad()
            loss.backward()
            optim.step()
        dynamiccl_pg.report_loss(loss)
        dynamiccl_pg.step()
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    if rank == 0:
        print(dynamiccl_pg.format_summary(backend_of(mesh.get_group())), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
