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

from . import groups as _groups
from .policy_schema import ENGINES, FORMAT, PolicyError
from .policy_schema import read as read_policy


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


def _targets(group, what: str) -> list:
    if group is not None:
        return [_groups.backend_of(group)]
    pgs = _groups.backends()
    if not pgs:
        raise RuntimeError(f"dynamiccl: {what}: this process has no dynamiccl process group; "
                           "call torch.distributed.init_process_group(backend='dynamiccl') first")
    return pgs


def _group_entry(pg) -> dict:
    return {
        "group_size": pg.size(),
        "nodes": pg.nodes,
        "group_desc": pg.group_desc,
        "engines": {name: pg.snapshot(e) for name, e in ENGINES.items()
                    if pg.snapshot(e) is not None},
    }


def write_policy_file(path: str, fingerprint: dict, groups: dict) -> None:
    """Writes a policy file (atomically): ``groups`` maps a group's name to its entry
    (group_size, nodes, group_desc, engines). The simulator writes its jobs' policies with it
    too, as the training data of a learned prior."""
    data = {"format": FORMAT, "fingerprint": fingerprint, "groups": groups}
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".dynamiccl-policy-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def save_policy(path: str, group=None) -> None:
    """Writes the policy of ``group`` (default: every live dynamiccl group of this process).

    Every rank holds the same policy (consensus); every rank may call this, the write is atomic.
    """
    pgs = _targets(group, "save_policy")
    write_policy_file(path, fingerprint(),
                      {pg.group_name_at_creation: _group_entry(pg) for pg in pgs})


def _restore(pgs, path: str) -> bool:
    """Restores ``pgs`` from ``path``, all or nothing: the whole file is checked before any
    learner changes. False (nothing restored for a group) on a fingerprint mismatch or when the
    file has nothing for a group."""
    data = read_policy(path)
    theirs = data["fingerprint"]
    for pg in pgs:
        diff = {k: (theirs.get(k), v) for k, v in fingerprint(pg).items() if theirs.get(k) != v}
        if diff:
            warnings.warn(f"dynamiccl: policy {path!r} was learned elsewhere ({diff}); "
                          "starting cold")
            return False
    restores, complete = [], True
    for pg in pgs:
        entry = data["groups"].get(pg.group_name_at_creation)
        if entry is None or entry["group_size"] != pg.size():
            complete = False  # nothing learned for this group
            continue
        restores += [(pg, name, snap) for name, snap in entry["engines"].items()
                     if pg.has_engine(ENGINES[name])]  # e.g. no NCCL engine in this group
    for pg, name, snap in restores:
        _check_arms_offered(pg, name, snap, path)
    for pg, name, snap in restores:
        engine = ENGINES[name]
        pg.restore(engine, snap)
    return complete


def _check_arms_offered(pg, engine: str, snap, path: str) -> None:
    """The file names arms by the catalog of the topology it was checked on; this group's own
    catalog (NCCL's depends on the group's topology) must offer them, or nothing is restored."""
    for i, state in enumerate(snap["states"]):
        offered = pg.arms(ENGINES[engine], state["op"])
        named = [state["incumbent"]] + [arm["name"] for arm in state["arms"]]
        missing = [name for name in named if name not in offered]
        if missing:
            raise PolicyError(
                f"dynamiccl: policy file {path!r}: groups[{json.dumps(pg.group_name_at_creation)}]"
                f".engines.{engine}.states[{i}] names arm {missing[0]!r}, which group "
                f"{pg.group_name_at_creation!r} does not offer for {state['op']}; accepted: "
                f"{', '.join(offered)}")


def load_into(pg, path: str) -> bool:
    """Restores ``pg``'s learners from ``path`` (DYNAMICCL_POLICY, at group creation)."""
    return _restore([pg], path)


def load_policy(path: str, group=None) -> bool:
    """Warm start: restore every dynamiccl group (or ``group``) from ``path``. Returns whether
    every group found its policy; raises PolicyError, naming the key, on a malformed file.

    Call it at the same point on every rank, before the group's learned traffic starts.
    """
    return _restore(_targets(group, "load_policy"), path)
