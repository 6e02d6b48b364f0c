"""Megatron-Core's parallel_state on "dynamiccl", on CPU ranks: the groups it creates get their
roles from Megatron's group descriptions, and what runs on them is learned per role.

    pip install --no-deps megatron-core==0.16.1
    torchrun --standalone --nproc-per-node=4 examples/megatron_parallel_state.py

Only parallel_state runs on CPU: Megatron's tensor-parallel layers and mappings call
torch.cuda.current_device() and need GPUs (there, the same groups and roles apply).
"""

import torch
import torch.distributed as dist

import dynamiccl_pg
from dynamiccl_pg.backend import backend_of


def main() -> None:
    from megatron.core import parallel_state as ps
    dist.init_process_group("dynamiccl")
    ps.initialize_model_parallel(tensor_model_parallel_size=2, create_gloo_process_groups=False)
    groups = {"tensor parallel": ps.get_tensor_model_parallel_group(),
              "data parallel": ps.get_data_parallel_group()}
    for _ in range(200):
        for g in groups.values():
            dist.all_reduce(torch.ones(1 << 14), group=g)
    if dist.get_rank() == 0:
        for name, g in groups.items():
            print(f"{name}: role {backend_of(g).group_role}")
            print(dynamiccl_pg.format_summary(g))
    ps.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
