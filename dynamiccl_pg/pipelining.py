"""torch.distributed.pipelining integration: role, stage and direction on the P2P traffic.

A pipeline schedule moves activations forward and gradients backward with batched isend/irecv:
each stage builds its P2P ops (``get_fwd_recv_ops``, ``get_fwd_send_ops``, ``get_bwd_recv_ops``,
``get_bwd_send_ops``) and the schedule issues a batch of them through one helper. Without
anything from here the traffic gets the group's role: "pp" when the stages run on a DeviceMesh
"pp" dimension ("mesh_pp") or Megatron's PIPELINE_MODEL_PARALLEL_GROUP, the group's role
otherwise (the world group is "default").

``annotate(schedule)`` makes the role explicit on every batch the schedule issues for its stages:
role "pp", the stage index (when every op of the batch belongs to one stage) and the direction
("forward" for activations, "backward" for gradients; none when a batch mixes both, as 1F1B's
steady state does with one batch of forward sends and backward receives, because the hint is
per call and the batch is issued inside torch). The hint is in scope only while that batch is
issued: collectives of the stage's own compute (tensor-parallel all-reduces, FSDP inside a
stage) keep their own roles, which a hint around ``schedule.step`` would overwrite.

What it changes today: send/recv have a single arm on both engines (NCCL does not consult its
tuner for point-to-point, and the CPU engine has no alternative schedule), so no policy decision
is made for them; the hint labels each call in the backend's per-call records (trace) and is the
context P2P arms will read.

How: the stage's op builders are wrapped per stage object to tag the P2P ops they return, and
the schedules' batching helper (``torch.distributed.pipelining.schedules._batch_p2p``, the one
funnel of every schedule in torch 2.11 to 2.15) is wrapped once per process to put the tags of a
batch in scope. Untagged batches pass through untouched. Shape inference
(``send_object_list``) is one-time and stays untagged.

These are torch internals: ``annotate`` first checks that they have the shape it expects (the
funnel takes the batch's ops first; each stage has the four builders) and otherwise tags nothing,
with one warning, rather than tag traffic wrongly.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Iterable, List, Optional, Tuple

from .hints import hint

_BUILDERS = {
    "get_fwd_recv_ops": "forward",
    "get_fwd_send_ops": "forward",
    "get_bwd_recv_ops": "backward",
    "get_bwd_send_ops": "backward",
    "_get_init_p2p_neighbors_ops": None,  # warm-up exchange in both directions
}
_TAG = "_dynamiccl_pp"  # attribute set on a tagged P2POp: (stage index, direction or None)
_MARK = "_dynamiccl_annotated"


def _tag_ops(builder, stage_index: int, direction: Optional[str]):
    @functools.wraps(builder)
    def build(*args, **kwargs):
        ops = builder(*args, **kwargs)
        for op in ops:
            setattr(op, _TAG, (stage_index, direction))
        return ops

    setattr(build, _MARK, True)
    return build


def batch_hint(ops: Iterable) -> Optional[Tuple[Optional[int], Optional[str]]]:
    """(stage, direction) shared by a batch's tagged ops (None where they differ), or None when
    no op of the batch was built by an annotated stage."""
    tags = [getattr(op, _TAG) for op in ops if hasattr(op, _TAG)]
    if not tags:
        return None
    stages = {t[0] for t in tags}
    directions = {t[1] for t in tags}
    return (stages.pop() if len(stages) == 1 else None,
            directions.pop() if len(directions) == 1 else None)


def _hinted_batch(batch_p2p):
    @functools.wraps(batch_p2p)
    def issue(p2p_ops, *args, **kwargs):
        tags = batch_hint(p2p_ops)
        if tags is None:
            return batch_p2p(p2p_ops, *args, **kwargs)
        stage, direction = tags
        with hint(role="pp", stage=stage, direction=direction):
            return batch_p2p(p2p_ops, *args, **kwargs)

    setattr(issue, _MARK, True)
    return issue


def _batch_funnel():
    """torch's batching helper, if it has the shape annotate expects (ops first), else None."""
    try:
        from torch.distributed.pipelining import schedules
    except ImportError:
        return None
    funnel = getattr(schedules, "_batch_p2p", None)
    if funnel is None:
        return None
    try:
        first = next(iter(inspect.signature(funnel).parameters), None)
    except (TypeError, ValueError):
        return None
    return schedules if first in ("p2p_ops", "ops") else None


def _unexpected_shape(stages) -> Optional[str]:
    """Why this torch's pipelining is not what annotate knows how to tag, or None."""
    if _batch_funnel() is None:
        return "no schedules._batch_p2p(p2p_ops, ...)"
    for stage in stages:
        missing = [n for n, d in _BUILDERS.items() if d and not callable(getattr(stage, n, None))]
        if missing:
            return f"stage {getattr(stage, 'stage_index', '?')} has no {', '.join(missing)}"
    return None


def _install_batch_wrapper() -> None:
    schedules = _batch_funnel()
    if not getattr(schedules._batch_p2p, _MARK, False):
        schedules._batch_p2p = _hinted_batch(schedules._batch_p2p)


def _stages_of(target) -> List:
    if hasattr(target, "stage_index") and hasattr(target, "get_fwd_send_ops"):
        return [target]
    stages = getattr(target, "_stages", None)
    if stages is None and getattr(target, "_stage", None) is not None:
        stages = [target._stage]
    if not stages:
        raise TypeError("dynamiccl_pg.pipelining.annotate expects a pipeline schedule or stage "
                        f"(torch.distributed.pipelining), got {type(target).__name__}")
    return list(stages)


def annotate(target) -> int:
    """Tags the P2P traffic of a schedule's stages (or of one stage) with role "pp", the stage
    index and the direction. Call once per schedule, before ``step``; idempotent. Returns the
    number of stages annotated (0, with one warning, when this torch's pipelining is not shaped
    as annotate expects: the traffic then keeps its group's role and no hint)."""
    stages = _stages_of(target)
    why = _unexpected_shape(stages)
    if why is not None:
        warnings.warn(f"dynamiccl: torch.distributed.pipelining in this torch is not shaped as "
                      f"dynamiccl_pg.pipelining.annotate expects ({why}); pipeline P2P traffic "
                      "keeps its group's role, untagged", stacklevel=2)
        return 0
    _install_batch_wrapper()
    for stage in stages:
        for name, direction in _BUILDERS.items():
            builder = getattr(stage, name, None)
            if builder is None or getattr(builder, _MARK, False):
                continue
            setattr(stage, name, _tag_ops(builder, stage.stage_index, direction))
    return len(stages)
