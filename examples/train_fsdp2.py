"""FSDP2 (fully_shard) training on the "dynamiccl" backend, CPU, synthetic data.

    torchrun --standalone --nproc-per-node=4 examples/train_fsdp2.py [--steps 40]

Each residual block is its own FSDP unit: per step every unit all-gathers its parameters
(forward, and again in backward since blocks reshard after forward) and reduce-scatters its
gradients with ReduceOp.AVG. The backend files that traffic under the "fsdp_ag" and "fsdp_rs"
heads from the op alone; dynamiccl_pg.fsdp.annotate adds each unit's index and pass to the hint.
"""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import dynamiccl_pg
import dynamiccl_pg.fsdp


class Block(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def make_model(features: int, width: int, depth: int, classes: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(features, width),
                               *[Block(width) for _ in range(depth)],
                               torch.nn.LayerNorm(width), torch.nn.Linear(width, classes))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--depth", type=int, default=4)
    args = parser.parse_args()

    dist.init_process_group("dynamiccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # same initial weights everywhere; fully_shard keeps this rank's shard
    features, classes = 32, 10
    teacher = torch.nn.Linear(features, classes)  # the labels come from a fixed random teacher
    model = make_model(features, args.width, args.depth, classes)

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp_shard",))
    for block in model:
        if isinstance(block, Block):
            fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    units = dynamiccl_pg.fsdp.annotate(model)
    if rank == 0:
        print(f"fully_shard: {units} FSDP units over {world} ranks")

    optim = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own samples
    for step in range(args.steps):
        x = torch.randn(args.batch, features, generator=data)
        with torch.no_grad():
            y = teacher(x).argmax(dim=1)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optim.step()
        optim.zero_grad()
        dynamiccl_pg.step()
        dynamiccl_pg.report_loss(loss)
        if step % 10 == 0 or step == args.steps - 1:
            shown = loss.detach().clone()
            dist.all_reduce(shown, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step:3d}  loss {shown.item():.4f}", flush=True)

    if rank == 0:
        for pg in dynamiccl_pg.backend.backends():
            print(dynamiccl_pg.format_summary(pg), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
