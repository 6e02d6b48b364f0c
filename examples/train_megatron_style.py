"""Megatron-style 3-D parallel training on "dynamiccl": a DeviceMesh ("pp", "dp", "tp"), CPU.

    torchrun --standalone --nproc-per-node=4 examples/train_megatron_style.py [--mesh 1x2x2]
    torchrun --standalone --nproc-per-node=4 examples/train_megatron_style.py --mesh 2x1x2

- tp: each MLP block is split Megatron-style (column-parallel up-projection, row-parallel
  down-projection, one all-reduce per block in forward and one in backward on the tp group);
- pp: when the mesh has more than one stage, the blocks are split over stages and run with
  torch.distributed.pipelining (GPipe) on the pp group;
- dp: gradients are averaged over the dp group after backward.

DeviceMesh describes each dimension's group as "mesh_<name>"; the backend turns that into the
group's role with no help, which the script prints first.
"""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

import dynamiccl_pg
import dynamiccl_pg.pipelining
from dynamiccl_pg.backend import backend_of

FEATURES, WIDTH, HIDDEN, OUTPUTS = 32, 64, 256, 8


class _CopyToTP(torch.autograd.Function):
    """Identity forward; the input gradient is summed over the tp group in backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """Partial outputs summed over the tp group in forward; identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous().clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class TPBlock(torch.nn.Module):
    """x + W2 gelu(W1 norm(x)): W1 split by rows (outputs), W2 by columns (inputs) over tp."""

    def __init__(self, tp_group, seed: int):
        super().__init__()
        self.group = tp_group
        tp, r = tp_group.size(), tp_group.rank()
        full = torch.Generator().manual_seed(seed)  # the same full weights on every rank
        w1 = torch.randn(HIDDEN, WIDTH, generator=full) / WIDTH ** 0.5
        w2 = torch.randn(WIDTH, HIDDEN, generator=full) / HIDDEN ** 0.5
        shard = HIDDEN // tp
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.w1 = torch.nn.Parameter(w1[r * shard:(r + 1) * shard].clone())
        self.b1 = torch.nn.Parameter(torch.zeros(shard))
        self.w2 = torch.nn.Parameter(w2[:, r * shard:(r + 1) * shard].clone())
        self.b2 = torch.nn.Parameter(torch.zeros(WIDTH))

    def forward(self, x):
        h = _CopyToTP.apply(self.norm(x), self.group)
        h = torch.nn.functional.gelu(torch.nn.functional.linear(h, self.w1, self.b1))
        return x + _ReduceFromTP.apply(torch.nn.functional.linear(h, self.w2), self.group) + self.b2


def build_stage(pp_rank: int, pp: int, blocks: int, tp_group) -> torch.nn.Module:
    """The layers pipeline stage `pp_rank` owns: input projection first, head last."""
    torch.manual_seed(0)  # replicated layers: identical on every rank
    layers = [torch.nn.Linear(FEATURES, WIDTH)] if pp_rank == 0 else []
    per_stage = blocks // pp
    layers += [TPBlock(tp_group, seed=100 + i)
               for i in range(pp_rank * per_stage, (pp_rank + 1) * per_stage)]
    if pp_rank == pp - 1:
        layers += [torch.nn.LayerNorm(WIDTH), torch.nn.Linear(WIDTH, OUTPUTS)]
    return torch.nn.Sequential(*layers)


def average_gradients(module: torch.nn.Module, dp_group) -> None:
    """One flat all-reduce (AVG) of every gradient over the dp group."""
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    if dp_group.size() == 1 or not grads:
        return
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.AVG, group=dp_group)
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mesh", default="1x2x2", help="pp x dp x tp; product = world size")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=4)
    args = parser.parse_args()

    dist.init_process_group("dynamiccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    pp, dp, tp = (int(v) for v in args.mesh.split("x"))
    if pp * dp * tp != world or HIDDEN % tp or args.blocks % pp:
        raise SystemExit(f"--mesh {args.mesh} does not fit {world} ranks, {HIDDEN} hidden units "
                         f"and {args.blocks} blocks")
    mesh = init_device_mesh("cpu", (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
    if rank == 0:
        for dim in ("pp", "dp", "tp"):
            b = backend_of(mesh.get_group(dim))
            print(f"mesh dim {dim}: size {mesh.size(mesh.mesh_dim_names.index(dim))}, "
                  f"group_desc {b.group_desc!r} -> role {b.group_role!r}", flush=True)

    pp_rank, dp_rank = mesh.get_local_rank("pp"), mesh.get_local_rank("dp")
    first, last = pp_rank == 0, pp_rank == pp - 1
    module = build_stage(pp_rank, pp, args.blocks, mesh.get_group("tp"))
    loss_fn = torch.nn.functional.mse_loss
    schedule = None
    if pp > 1:
        stage = PipelineStage(module, pp_rank, pp, torch.device("cpu"),
                              group=mesh.get_group("pp"))
        schedule = ScheduleGPipe(stage, n_microbatches=4, loss_fn=loss_fn)
        dynamiccl_pg.pipelining.annotate(schedule)

    optim = torch.optim.SGD(module.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + dp_rank)  # one data stream per dp replica
    teacher = torch.Generator().manual_seed(7)
    target_map = torch.randn(FEATURES, OUTPUTS, generator=teacher) / FEATURES ** 0.5
    for step in range(args.steps):
        x = torch.randn(args.batch, FEATURES, generator=data)
        y = torch.tanh(x @ target_map)
        if schedule is None:
            loss = loss_fn(module(x), y)
            loss.backward()
        else:
            losses = []
            if first:
                schedule.step(x)
            elif last:
                schedule.step(target=y, losses=losses)
            else:
                schedule.step()
            loss = torch.stack(losses).mean() if last else torch.zeros(())
        average_gradients(module, mesh.get_group("dp"))
        optim.step()
        optim.zero_grad()
        dynamiccl_pg.step()
        if step % 10 == 0 or step == args.steps - 1:
            # Only last-stage ranks hold a loss: average theirs over the world for printing.
            shown = loss.detach().clone() * (1.0 if last else 0.0)
            dist.all_reduce(shown)
            if rank == 0:
                print(f"step {step:3d}  loss {shown.item() / (dp * tp):.4f}", flush=True)

    if rank == 0:
        for pg in dynamiccl_pg.backend.backends():
            print(dynamiccl_pg.format_summary(pg), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
