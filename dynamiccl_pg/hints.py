"""``dynamiccl_pg.hint(...)``: tell the backend what the next collectives on this thread are for.

Thread-local and cheap: framework integration (DDP hook, FSDP2, pipelining) and users set it
around a collective; the backend folds it into the call's context (role, bucket, stage...).
"""

from __future__ import annotations

import contextlib
from typing import Optional, Union

from . import _C, config

UNSET = -1
# Both indexed by the C++ values (core/types.h). priority: 0 background (the call overlaps
# compute), 1 normal (the framework context decides), 2 critical (the step waits for it).
_DIRECTIONS = {name: i for i, name in enumerate(config.VOCABULARY["hint_directions"])}
PRIORITIES = tuple(config.VOCABULARY["hint_priorities"])
_PRIORITY_RANGE = ("an integer in 0.." + str(len(PRIORITIES) - 1) + " (" +
                   ", ".join(f"{i} {name}" for i, name in enumerate(PRIORITIES)) + ") or None")


def _index(name: str, value, accepted: str = "an integer >= 0 or None", highest=None) -> int:
    if value is None:
        return UNSET
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"dynamiccl_pg.hint: {name}={value!r} ({type(value).__name__}) is not "
                        f"accepted; accepted: {accepted}")
    if value < 0 or (highest is not None and value > highest):
        raise ValueError(f"dynamiccl_pg.hint: {name}={value!r} is not accepted; "
                         f"accepted: {accepted}")
    return value


def _encode(role, bucket, is_last, stage, direction, priority):
    if role is None:
        role_id = UNSET
    elif role in config.ROLES:
        role_id = config.ROLES.index(role)  # ROLES is indexed by the C++ Role values
    else:
        raise ValueError(f"dynamiccl_pg.hint: role={role!r} is not accepted; "
                         f"accepted: {', '.join(config.ROLES)}")
    if direction is None:
        direction_id = UNSET
    elif direction in _DIRECTIONS:
        direction_id = _DIRECTIONS[direction]
    else:
        raise ValueError(f"dynamiccl_pg.hint: direction={direction!r} is not accepted; "
                         f"accepted: {', '.join(map(repr, _DIRECTIONS))} or None")
    if is_last is None:
        last = UNSET
    elif isinstance(is_last, bool):
        last = int(is_last)
    else:
        raise TypeError(f"dynamiccl_pg.hint: is_last={is_last!r} ({type(is_last).__name__}) is "
                        "not accepted; accepted: True, False or None")
    return (role_id, _index("bucket", bucket), last, _index("stage", stage), direction_id,
            _index("priority", priority, _PRIORITY_RANGE, len(PRIORITIES) - 1))


@contextlib.contextmanager
def hint(role: Optional[str] = None, bucket: Optional[int] = None,
         is_last: Optional[bool] = None, stage: Optional[int] = None,
         direction: Optional[Union[str, None]] = None, priority: Optional[int] = None):
    """Context manager: collectives issued on this thread inside it carry these facts.

    ``role`` forces the policy head (one of config.ROLES). ``is_last`` (DDP: the step's last
    bucket) makes the call exposed and ends the step; ``priority`` 0 makes it overlapped, 2
    exposed, 1 leaves it to the context; ``bucket``, ``stage`` and ``direction`` say where in the
    step it is (FSDP2's first forward all-gather is exposed, its others overlapped) and label it
    in the trace. Nested hints replace the outer one for their duration.
    """
    new = _encode(role, bucket, is_last, stage, direction, priority)
    previous = _C.get_hint()
    _C.set_hint(*new)
    try:
        yield
    finally:
        _C.set_hint(*previous)
