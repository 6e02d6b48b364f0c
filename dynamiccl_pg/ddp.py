"""DDP integration: a comm hook that tells the backend which gradient bucket each all-reduce is.

``dynamiccl_pg.register_ddp_hook(model)`` keeps DDP's semantics (average of gradients, the
Future DDP waits on) and adds the bucket index, whether it is the step's last bucket, and its size
to the context of the all-reduce, so bucket traffic lands in the data-parallel policy head.
"""

import torch
import torch.distributed as dist

from .hints import hint


# DDP checks the hook's annotations at registration: they must be the real types, not strings.
def _allreduce_with_bucket_hint(group,
                                bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    tensor = bucket.buffer()
    group_to_use = group if group is not None else dist.group.WORLD
    # Same arithmetic as DDP's default hook: divide by the world size, then sum.
    tensor.div_(group_to_use.size())
    with hint(role="dp", bucket=bucket.index(), is_last=bucket.is_last()):
        work = dist.all_reduce(tensor, group=group_to_use, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def register_ddp_hook(model: torch.nn.parallel.DistributedDataParallel, group=None) -> None:
    """Registers the bucket-hint hook on a DDP model (call once, before the first backward)."""
    if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise TypeError("dynamiccl_pg.register_ddp_hook expects a DistributedDataParallel "
                        f"model, got {type(model).__name__}")
    model.register_comm_hook(group, _allreduce_with_bucket_hint)
