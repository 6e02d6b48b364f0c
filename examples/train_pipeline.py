"""Pipeline-parallel training (torch.distributed.pipelining) on "dynamiccl", CPU, synthetic data.

    torchrun --standalone --nproc-per-node=4 examples/train_pipeline.py [--schedule 1f1b|gpipe]

One stage per rank. Activations travel forward and gradients backward as batched isend/irecv;
dynamiccl_pg.pipelining.annotate(schedule) puts role "pp", the stage index and the direction in
scope of each batch, so the backend sees pipeline traffic even on the world group.
"""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

import dynamiccl_pg
import dynamiccl_pg.pipelining

FEATURES, WIDTH, OUTPUTS = 32, 128, 8


def stage_module(index: int, stages: int) -> torch.nn.Module:
    """The slice of a (stages+1)-layer MLP that stage `index` owns."""
    first, last = index == 0, index == stages - 1
    layers = [torch.nn.Linear(FEATURES if first else WIDTH, WIDTH), torch.nn.GELU()]
    if last:
        layers.append(torch.nn.Linear(WIDTH, OUTPUTS))
    return torch.nn.Sequential(*layers)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedule", choices=("1f1b", "gpipe"), default="1f1b")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--microbatches", type=int, default=4)
    args = parser.parse_args()

    dist.init_process_group("dynamiccl")
    rank, stages = dist.get_rank(), dist.get_world_size()
    first, last = rank == 0, rank == stages - 1
    torch.manual_seed(rank)
    module = stage_module(rank, stages)
    stage = PipelineStage(module, rank, stages, torch.device("cpu"))
    schedule_cls = Schedule1F1B if args.schedule == "1f1b" else ScheduleGPipe
    schedule = schedule_cls(stage, args.microbatches, loss_fn=torch.nn.functional.mse_loss)
    dynamiccl_pg.pipelining.annotate(schedule)

    optim = torch.optim.Adam(module.parameters(), lr=1e-3)
    torch.manual_seed(1234)  # the same data stream on every rank: first and last stage use it
    teacher = torch.nn.Sequential(torch.nn.Linear(FEATURES, OUTPUTS), torch.nn.Tanh())
    for step in range(args.steps):
        x = torch.randn(args.batch, FEATURES)
        with torch.no_grad():
            y = teacher(x)
        losses = []
        if first:
            schedule.step(x)
        elif last:
            schedule.step(target=y, losses=losses)
        else:
            schedule.step()
        optim.step()
        optim.zero_grad()
        dynamiccl_pg.step()
        if step % 10 == 0 or step == args.steps - 1:
            # The last stage owns the loss; rank 0 prints it.
            loss = torch.stack(losses).mean() if last else torch.zeros(())
            dist.broadcast(loss, src=stages - 1)
            if rank == 0:
                print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)

    if rank == 0:
        print(f"{args.schedule} over {stages} stages, {args.microbatches} microbatches")
        for pg in dynamiccl_pg.backend.backends():
            print(dynamiccl_pg.format_summary(pg), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
