"""What a policy file may contain, checked whole before anything is restored.

Every refusal is a PolicyError naming the file, the key path of the bad value
(``groups["0"].engines.cpu.states[3].incumbent``) and what is accepted there.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict

from . import _C
from .config import EXPOSURES, OPS, ROLES, VOCABULARY

# /2: a state is keyed by exposure and fusion too (a /1 file's states would not say which).
# /3: each arm carries its step-trial verdicts (step_adopted, step_rejected).
# /4: each group says how many nodes it spans, each arm its analytic prior (what a learned prior
#     is trained on).
FORMAT = "dynamiccl-policy/4"
ENGINES = _C.Engine.__members__  # name -> engine
SIZE_BINS = VOCABULARY["size_bins"]
# NCCL arms depend on the group's topology (which algorithms exist, channel caps), so a file is
# checked here for their form only; restoring checks them against the group's own catalog.
_NCCL_ARM_FORM = (f"default, or ALGO/PROTO, ALGO/PROTO/cN, ALGO/PROTO/kCK or "
                  f"ALGO/PROTO/cN/kCK with ALGO one of {', '.join(VOCABULARY['nccl_algos'])}, "
                  f"PROTO one of {', '.join(VOCABULARY['nccl_protos'])}, "
                  f"N 1..{VOCABULARY['nccl_max_channels']}, C a chunk size in KiB (NCCL >= 2.30)")
_UINT64_MAX = (1 << 64) - 1

# Keys of each object, every one required (save_policy writes them all); defined once, in the
# core (csrc/policy/learner.h), which writes and reads the snapshots.
KEYS = {level: tuple(keys) for level, keys in _C.policy_keys().items()}
_TOP_KEYS = KEYS["file"]
_GROUP_KEYS = KEYS["group"]
_SNAPSHOT_KEYS = KEYS["snapshot"]
_STATE_KEYS = KEYS["state"]
_ARM_KEYS = KEYS["arm"]


class PolicyError(ValueError):
    """A policy file that cannot be loaded."""


def _child(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


class _Checker:
    def __init__(self, file: str):
        self.file = file

    def fail(self, path, problem: str):
        where = "" if path is None else f"{path or 'top level'}: "  # None: the file as a whole
        raise PolicyError(f"dynamiccl: policy file {self.file!r}: {where}{problem}")

    def refuse(self, path: str, value, accepted: str):
        where = f"{path}=" if path else "top level "
        self.fail(None, f"{where}{_short(value)} is not accepted; accepted: {accepted}")

    def obj(self, value, path: str, keys=None) -> Dict[str, Any]:
        if not isinstance(value, dict):
            self.refuse(path, value, "an object" + (f" with keys {', '.join(keys)}" if keys
                                                    else ""))
        for key in keys or ():
            if key not in value:
                self.fail(_child(path, key), f"missing; required keys here: {', '.join(keys)}")
        for key in value:
            if keys is not None and key not in keys:
                self.fail(_child(path, key), f"unknown key; accepted: {', '.join(keys)}")
        return value

    def lst(self, value, path: str) -> list:
        if not isinstance(value, list):
            self.refuse(path, value, "a list")
        return value

    def string(self, value, path: str, accepted=None, what: str = "") -> str:
        if not isinstance(value, str) or (accepted is not None and value not in accepted):
            self.refuse(path, value, what + ", ".join(accepted) if accepted is not None
                        else "a string")
        return value

    def arm(self, value, path: str, engine: str, op: str) -> str:
        if engine == "nccl":
            if not (isinstance(value, str) and (value == "default" or _C.is_nccl_arm_name(value))):
                self.refuse(path, value, _NCCL_ARM_FORM)
            return value
        return self.string(value, path, _C.arm_names(ENGINES[engine], op),
                           f"the {engine} arms of {op}: ")

    def integer(self, value, path: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            self.refuse(path, value, f"integers {lo}..{hi}")
        return value

    def cost(self, value, path: str) -> float:
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or value < 0):
            self.refuse(path, value, "finite numbers >= 0")
        return value

    def boolean(self, value, path: str) -> bool:
        if not isinstance(value, bool):
            self.refuse(path, value, "true, false")
        return value


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_states(c: _Checker, snap, path: str, engine: str) -> None:
    states = c.lst(c.obj(snap, path, _SNAPSHOT_KEYS)["states"], _child(path, "states"))
    seen = {}
    for i, state in enumerate(states):
        at = _child(_child(path, "states"), i)
        c.obj(state, at, _STATE_KEYS)
        role = c.string(state["role"], _child(at, "role"), ROLES)
        op = c.string(state["op"], _child(at, "op"), OPS)
        size_bin = c.integer(state["size_bin"], _child(at, "size_bin"), 0, SIZE_BINS - 1)
        exposure = c.string(state["exposure"], _child(at, "exposure"), EXPOSURES)
        fused = c.boolean(state["fused"], _child(at, "fused"))
        key = (role, op, size_bin, exposure, fused)
        if key in seen:
            c.fail(at, f"state (role {role}, op {op}, size_bin {size_bin}, exposure {exposure}, "
                       f"fused {fused}) is already listed at states[{seen[key]}]; "
                       "accepted: each state once")
        seen[key] = i
        c.arm(state["incumbent"], _child(at, "incumbent"), engine, op)
        c.boolean(state["converged"], _child(at, "converged"))
        names = set()
        for j, arm in enumerate(c.lst(state["arms"], _child(at, "arms"))):
            arm_at = _child(_child(at, "arms"), j)
            c.obj(arm, arm_at, _ARM_KEYS)
            name = c.arm(arm["name"], _child(arm_at, "name"), engine, op)
            if name in names:
                c.fail(_child(arm_at, "name"), f"arm {name!r} is listed twice in this state")
            names.add(name)
            c.integer(arm["samples"], _child(arm_at, "samples"), 0, _UINT64_MAX)
            c.cost(arm["mean_us"], _child(arm_at, "mean_us"))
            c.cost(arm["m2"], _child(arm_at, "m2"))
            c.cost(arm["analytic_us"], _child(arm_at, "analytic_us"))
            c.boolean(arm["eliminated"], _child(arm_at, "eliminated"))
            c.boolean(arm["step_adopted"], _child(arm_at, "step_adopted"))
            c.boolean(arm["step_rejected"], _child(arm_at, "step_rejected"))


def validate(data, file: str) -> dict:
    """Checks a parsed policy file; returns it, or raises PolicyError."""
    c = _Checker(file)
    c.obj(data, "", _TOP_KEYS)
    c.string(data["format"], "format", (FORMAT,))
    c.obj(data["fingerprint"], "fingerprint")
    for name, group in c.obj(data["groups"], "groups").items():
        at = _child("groups", name)
        c.obj(group, at, _GROUP_KEYS)
        c.integer(group["group_size"], _child(at, "group_size"), 1, (1 << 31) - 1)
        c.integer(group["nodes"], _child(at, "nodes"), 1, group["group_size"])
        c.string(group["group_desc"], _child(at, "group_desc"))
        engines_at = _child(at, "engines")
        for engine, snap in c.obj(group["engines"], engines_at).items():
            if engine not in ENGINES:
                c.refuse(_child(engines_at, engine), engine,
                         "engine names " + ", ".join(ENGINES))
            _check_states(c, snap, _child(engines_at, engine), engine)
    return data


def _no_duplicate_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def read(path: str) -> dict:
    """Reads and checks a policy file; raises PolicyError naming it."""
    problem = None
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except OSError as e:
        problem = f"cannot be read ({e.strerror})"
    except UnicodeDecodeError as e:
        problem = (f"is not UTF-8 text (byte {raw[e.start]:#04x} at offset {e.start}); "
                   "accepted: a JSON file written by save_policy")
    except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
        problem = f"is not valid JSON ({e}); accepted: a JSON file written by save_policy"
    if problem:
        _Checker(path).fail(None, problem)
    return validate(data, path)
