"""``dynamiccl_pg.hint(...)``: tell the backend what the next collectives on this thread are for.

Thread-local and cheap: framework integration (DDP hook, FSDP2, pipelining) and users set it
around a collective; the backend folds it into the call's context (role, bucket, stage...).
"""

from __future__ import annotations

import contextlib
from typing import Optional, Union

from . import _C, config

UNSET = -1
_DIRECTIONS = {"forward": 0, "backward": 1}


def _index(name: str, value) -> int:
    if value is None:
        return UNSET
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"dynamiccl_pg.hint: {name}={value!r} is not accepted; "
                         "accepted: an integer >= 0 or None")
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
                         "accepted: 'forward', 'backward' or None")
    last = UNSET if is_last is None else int(bool(is_last))
    return (role_id, _index("bucket", bucket), last, _index("stage", stage), direction_id,
            _index("priority", priority))


@contextlib.contextmanager
def hint(role: Optional[str] = None, bucket: Optional[int] = None,
         is_last: Optional[bool] = None, stage: Optional[int] = None,
         direction: Optional[Union[str, None]] = None, priority: Optional[int] = None):
    """Context manager: collectives issued on this thread inside it carry these facts.

    ``role`` forces the policy head (one of config.ROLES); the others refine the context.
    Nested hints replace the outer one for their duration.
    """
    new = _encode(role, bucket, is_last, stage, direction, priority)
    previous = _C.get_hint()
    _C.set_hint(*new)
    try:
        yield
    finally:
        _C.set_hint(*previous)
