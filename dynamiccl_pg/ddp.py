"""DDP integration: a comm hook that tells the backend which gradient bucket each all-reduce is.

``dynamiccl_pg.register_ddp_hook(model)`` keeps DDP's semantics (average of gradients, the
Future DDP waits on) and adds the bucket index and whether it is the step's last bucket to the
context of the all-reduce, so bucket traffic lands in the data-parallel policy head as overlapped
(every bucket but the last) or exposed (the last, which also ends the step). The hook is C++
(csrc/backend/ddp_comm_hook.h): a Python one would take the GIL twice per bucket.
"""

import torch
import torch.distributed as dist

from . import _C


def register_ddp_hook(model: torch.nn.parallel.DistributedDataParallel, group=None) -> None:
    """Registers the bucket-hint hook on a DDP model (call once, before the first backward).

    ``group``: the process group the buckets are all-reduced on; by default the model's own.
    """
    if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise TypeError("dynamiccl_pg.register_ddp_hook expects a DistributedDataParallel "
                        f"model, got {type(model).__name__}")
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise TypeError("dynamiccl_pg.register_ddp_hook: group must be a ProcessGroup or None, "
                        f"got {type(group).__name__}")
    # The reducer refuses a second hook itself ("can only be called once").
    _C.register_ddp_comm_hook(model.reducer, group if group is not None else model.process_group)
