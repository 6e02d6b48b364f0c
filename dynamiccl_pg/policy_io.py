"""save_policy / load_policy: what the learners know, as JSON, for warm starts and frozen runs.

The file holds one entry per process group, keyed by the group's name (groups are named in
creation order, so the same program names them the same way every run), and a fingerprint of the
cluster and library versions. Loading into a different setting warns and starts cold.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import warnings

import torch
import torch.distributed as dist

from . import _C
from . import backend as _backend

FORMAT = "dynamiccl-policy/1"
ENGINES = _C.Engine.__members__  # name -> engine


def fingerprint(pg=None) -> dict:
    cuda = torch.cuda.is_available()
    # While the default group is being created the world is not registered yet: its size is
    # the world size then.
    world = dist.get_world_size() if dist.is_initialized() else (pg.size() if pg else 1)
    return {
        "world_size": world,
        "torch": torch.__version__.split("+")[0],
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
        "device": torch.cuda.get_device_name() if cuda else platform.machine(),
    }


def _group_entry(pg) -> dict:
    return {
        "group_size": pg.size(),
        "group_desc": pg.group_desc,
        "engines": {name: pg.snapshot(e) for name, e in ENGINES.items()
                    if pg.snapshot(e) is not None},
    }


def save_policy(path: str, group=None) -> None:
    """Writes the policy of ``group`` (default: every dynamiccl group of this process).

    Every rank holds the same policy (consensus); every rank may call this, the write is atomic.
    """
    pgs = [_backend.backend_of(group)] if group is not None else _backend.backends()
    data = {"format": FORMAT, "fingerprint": fingerprint(),
            "groups": {pg.group_name_at_creation: _group_entry(pg) for pg in pgs}}
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".dynamiccl-policy-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _read(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"dynamiccl: cannot read policy file {path!r}: {e}") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"dynamiccl: {path!r} is not a policy file (format must be {FORMAT!r})")
    return data


def load_into(pg, path: str) -> bool:
    """Restores ``pg``'s learners from ``path``. Returns False (with a warning) on a mismatch."""
    data = _read(path)
    mine = fingerprint(pg)
    theirs = data.get("fingerprint", {})
    diff = {k: (theirs.get(k), v) for k, v in mine.items() if theirs.get(k) != v}
    if diff:
        warnings.warn(f"dynamiccl: policy {path!r} was learned elsewhere ({diff}); starting cold")
        return False
    entry = data.get("groups", {}).get(pg.group_name_at_creation)
    if entry is None or entry.get("group_size") != pg.size():
        return False  # nothing learned for this group
    for name, snap in entry.get("engines", {}).items():
        if name not in ENGINES:
            raise ValueError(f"dynamiccl: policy file engine {name!r} unknown; accepted: "
                             f"{', '.join(ENGINES)}")
        if not pg.has_engine(ENGINES[name]):
            continue  # e.g. no NCCL engine in this group
        pg.restore(ENGINES[name], snap)
    return True


def load_policy(path: str, group=None) -> bool:
    """Warm start: restore every dynamiccl group (or ``group``) from ``path``.

    Call it at the same point on every rank, before the group's learned traffic starts.
    """
    pgs = [_backend.backend_of(group)] if group is not None else _backend.backends()
    return all([load_into(pg, path) for pg in pgs])
