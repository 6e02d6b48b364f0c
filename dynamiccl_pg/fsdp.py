"""FSDP2 integration: what the backend sees of ``fully_shard`` and ``annotate(model)``.

Per FSDP unit, FSDP2 issues an all-gather (unshard, before forward and again before backward
when parameters were resharded) and a reduce-scatter of the gradients (after backward) on its
shard group; with HSDP an all-reduce on the replicate group follows. The backend needs nothing
from here to tell them apart: on a group whose role is "dp" or "default" (the world group,
DeviceMesh "mesh_dp_shard" / "mesh_fsdp", Megatron's DATA_PARALLEL_GROUP) it maps all-gather to
the "fsdp_ag" head and reduce-scatter to "fsdp_rs" from the op, and the HSDP all-reduce lands in
"dp" from "mesh_dp_replicate". FSDP2 reduces with ReduceOp.AVG (fp32/bf16) or PREMUL_SUM (a
custom gradient divide factor); the CPU engine emulates both on top of SUM.

``annotate(model)`` is optional. Per FSDP unit it adds to each of its collectives:

- the role, pinned ("fsdp_ag" / "fsdp_rs"), so the traffic keeps its head even when the shard
  group's description maps to another role (a mesh dimension named "cp" or a DYNAMICCL_ROLE_MAP
  entry);
- the unit's index in module order as ``bucket`` (the same on every rank);
- ``direction``: "forward" for an unshard before forward, "backward" for one issued inside the
  backward pass (reshard_after_forward) and for the reduce-scatter.

The role selects the policy head; unit and pass travel in the call's context (the learner's
states are keyed by role, op and size today, so they are there for policies that use them).

It uses FSDP2's public communication override (``FSDPModule.set_custom_all_gather`` /
``set_custom_reduce_scatter``) with a wrapper that delegates buffer allocation and the collective
itself to the comm FSDP would have used (a plain all_gather_into_tensor / reduce_scatter_tensor
where that cannot be read), so buffers, streams, async_op and the reduce op stay FSDP's. The hint
is in scope for that one call only: nothing issued around it (a tensor-parallel all-reduce inside
the unit, the HSDP all-reduce) inherits it. Whether an unshard is a prefetch or on demand is not
visible at that call without reading FSDP's private state, so it is not reported. Call
``annotate`` after ``fully_shard`` and after any
``set_allocate_memory_from_process_group_for_comm`` (FSDP refuses that call once a custom comm is
set); eager mode only.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .hints import hint


def _in_backward() -> bool:
    # The autograd engine runs a graph task while backward executes; -1 outside of one.
    current = getattr(torch._C, "_current_graph_task_id", None)
    return current is not None and current() != -1


def _plain_all_gather(output_tensor, input_tensor, group, async_op=False):
    return dist.all_gather_into_tensor(output_tensor, input_tensor, group=group,
                                       async_op=async_op)


def _plain_reduce_scatter(output_tensor, input_tensor, group, op, async_op=False):
    return dist.reduce_scatter_tensor(output_tensor, input_tensor, op=op, group=group,
                                      async_op=async_op)


class _HintedComm:
    """Delegates to FSDP's comm (or a plain collective) with the unit's hint in scope."""

    role = ""

    def __init__(self, inner, unit: int):
        self.inner = inner
        self.unit = unit

    def allocate(self, size, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        if self.inner is not None:
            return self.inner.allocate(size, dtype=dtype, device=device)
        return torch.empty(*size, dtype=dtype, device=device)

    def _direction(self) -> str:
        return "backward" if _in_backward() else "forward"


class HintedAllGather(_HintedComm):
    """FSDP2 ``AllGather`` comm: the unit's all-gather, with role fsdp_ag, bucket and pass."""

    role = "fsdp_ag"

    def __call__(self, output_tensor, input_tensor, group, async_op: bool = False):
        issue = self.inner if self.inner is not None else _plain_all_gather
        with hint(role=self.role, bucket=self.unit, direction=self._direction()):
            return issue(output_tensor=output_tensor, input_tensor=input_tensor, group=group,
                         async_op=async_op)


class HintedReduceScatter(_HintedComm):
    """FSDP2 ``ReduceScatter`` comm: the unit's gradient reduce-scatter, role fsdp_rs."""

    role = "fsdp_rs"

    def __call__(self, output_tensor, input_tensor, group, op, async_op: bool = False):
        issue = self.inner if self.inner is not None else _plain_reduce_scatter
        with hint(role=self.role, bucket=self.unit, direction="backward"):
            return issue(output_tensor=output_tensor, input_tensor=input_tensor, group=group,
                         op=op, async_op=async_op)


def _current_comms(module):
    """The comms FSDP would use for this unit now (None where they cannot be read)."""
    state = getattr(module, "_get_fsdp_state", None)
    group = getattr(state(), "_fsdp_param_group", None) if state is not None else None
    if group is None:
        return None, None, False
    return (getattr(group, "_all_gather_comm", None), getattr(group, "_reduce_scatter_comm", None),
            True)


def _unwrap(comm, kind):
    return comm.inner if isinstance(comm, kind) else comm


def annotate(model: torch.nn.Module) -> int:
    """Adds role, unit index and pass hints to every FSDP unit of ``model`` (see the module doc).

    Returns the number of units annotated (units without parameters of their own issue no
    collectives and are skipped). Idempotent: annotating again refreshes the indices.
    """
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError as e:  # torch without FSDP2
        raise RuntimeError("dynamiccl_pg.fsdp.annotate needs FSDP2 "
                           "(torch.distributed.fsdp.FSDPModule)") from e
    if not hasattr(FSDPModule, "set_custom_all_gather"):
        raise RuntimeError("dynamiccl_pg.fsdp.annotate needs FSDPModule.set_custom_all_gather, "
                           "which this torch version lacks; FSDP traffic still gets the fsdp_ag / "
                           "fsdp_rs heads from the op")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"dynamiccl_pg.fsdp.annotate expects an nn.Module, got "
                        f"{type(model).__name__}")
    units = 0
    for module in model.modules():
        if not isinstance(module, FSDPModule):
            continue
        all_gather, reduce_scatter, has_params = _current_comms(module)
        if not has_params:
            continue
        module.set_custom_all_gather(HintedAllGather(_unwrap(all_gather, HintedAllGather), units))
        module.set_custom_reduce_scatter(
            HintedReduceScatter(_unwrap(reduce_scatter, HintedReduceScatter), units))
        units += 1
    if units == 0:
        raise ValueError("dynamiccl_pg.fsdp.annotate: no FSDP unit with parameters in the model; "
                         "call it after fully_shard(...)")
    return units

