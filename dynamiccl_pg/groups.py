"""The live dynamiccl groups of this process: for stats()/save_policy() without a group argument,
the training signals, and the exit-time summary and trace. The creator (backend.py) adds each
group it makes; everything that reads them comes here, never to the creator.

A destroyed group's backend (shut down by destroy_process_group) is dropped at the next look (a
group's creation, backends()) so that it is freed; on_destroyed hooks (telemetry's) first keep
what the exit-time outputs need of it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from . import _C

_created: list = []
on_destroyed: list = []  # callables(pg), each run once per destroyed backend
_process_rank = None  # this process's global rank, still known once every group is gone


def add(pg) -> None:
    global _process_rank
    _process_rank = pg.global_rank
    _drop_destroyed()
    _created.append(pg)


def _drop_destroyed() -> None:
    live = []
    for pg in _created:
        if pg.shut_down:
            for hook in on_destroyed:
                hook(pg)
        else:
            live.append(pg)
    _created[:] = live


def backends():
    """The live dynamiccl backends of this process, oldest first."""
    _drop_destroyed()
    return list(_created)


def process_rank() -> int:
    """This process's global rank (0 before any dynamiccl group was created)."""
    if dist.is_initialized():
        return dist.get_rank()
    return _process_rank if _process_rank is not None else 0


def backend_of(group=None):
    """The ProcessGroupDynamicCCL behind ``group`` (default: the world)."""
    pg = group if group is not None else dist.group.WORLD
    if pg is None:
        raise RuntimeError("dynamiccl: no process group; call init_process_group first")
    if isinstance(pg, _C.ProcessGroupDynamicCCL):
        return pg
    b = pg._get_backend(torch.device("cpu"))
    if not isinstance(b, _C.ProcessGroupDynamicCCL):
        raise ValueError(f"dynamiccl: group {pg.group_name!r} does not use the dynamiccl backend "
                         f"(its CPU backend is {type(b).__name__})")
    if b.shut_down:
        raise ValueError(f"dynamiccl: group {pg.group_name!r} was destroyed; its policy and "
                         "statistics went with it")
    return b
