"""Configuration: DYNAMICCL_* environment variables and ``dynamiccl_pg.Options``.

Every value is validated here, with an error that names the variable, the bad value and what is
accepted. The resolved configuration must be identical on every rank (it shapes decisions), so
only values a launcher sets uniformly belong here.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tempfile
import warnings
from typing import Dict, List, Optional

from . import _C
from .errors import ConfigError
from .topology import NCCL_CHANNEL_BOUNDS, parse_override

# The core's vocabularies, indexed by their C++ enum values (defined once, in csrc/core/types.h).
VOCABULARY = _C.vocabulary()
MODES = tuple(VOCABULARY["modes"])
COST_REDUCTIONS = tuple(VOCABULARY["cost_reductions"])
ROLES = tuple(VOCABULARY["roles"])
OPS = tuple(VOCABULARY["ops"])
EXPOSURES = tuple(VOCABULARY["exposures"])
HEAD_SETTINGS = {h["name"]: h for h in _C.head_settings()}  # the learner's table
LIBRARY_VERSION = "0.2.0"  # the package's version too (setup.py reads it)


@dataclasses.dataclass
class Options:
    """Per-group options; pass as ``pg_options`` to ``init_process_group`` / ``new_group``.

    Fields left ``None`` take the environment's value (or the default). ``nccl_options`` is a
    ``torch.distributed.ProcessGroupNCCL.Options`` handed to the inner NCCL engine.
    """

    mode: Optional[str] = None
    round_calls: Optional[int] = None
    cost_reduce: Optional[str] = None
    force: Optional[str] = None
    role_map: Optional[str] = None
    regret_budget: Optional[float] = None
    heads: Optional[str] = None
    prior: Optional[str] = None
    nccl_options: object = None


# Bounds of the integer variables: beyond them a value only costs memory (ROUND_CALLS sizes the
# consensus buffers, about 125 bytes per call; DECISION_LOG reserves 48 bytes per entry when a
# group is created) or means "never" (LOSS_STALL_ROUNDS).
ROUND_CALLS_RANGE = (1, 65536)
DECISION_LOG_RANGE = (0, 1 << 20)
LOSS_STALL_ROUNDS_RANGE = (1, 1000000)

# The core's defaults (csrc/backend/config.h, the learner's), as docs/configuration.md shows them:
# 0/1 for switches, fractions with two decimals where that is exact (0.10).
CORE_DEFAULTS = _C.backend_defaults()


def _core_default(key: str) -> str:
    value = CORE_DEFAULTS[key]
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and float(f"{value:.2f}") == value:
        return f"{value:.2f}"
    return str(value)


# name: (default, description) — docs/configuration.md's table mirrors this (a test keeps it so).
ENV_VARS = {
    "DYNAMICCL_MODE": (_core_default("mode"), "learn | frozen | off"),
    "DYNAMICCL_ROUND_CALLS": (_core_default("round_calls"), "learned calls between consensus "
                              "rounds (K), %d..%d" % ROUND_CALLS_RANGE),
    "DYNAMICCL_COST_REDUCE": (_core_default("cost_reduce"), "per-rank durations -> cost: auto "
                              "(max on CPU, min on NCCL) | min | max"),
    "DYNAMICCL_FORCE": ("", "pin ops to arms on every rank, e.g. allreduce:ring;allgather:rd"),
    "DYNAMICCL_ROLE_MAP": ("", "map group descriptions to roles, e.g. my_tp_group=tp;emb=dp"),
    "DYNAMICCL_POLICY": ("", "policy JSON to load at group creation (warm start); must exist"),
    "DYNAMICCL_PRIOR": ("", "a learned prior (python -m dynamiccl_pg prior train) to order and "
                        "prune the arms new states probe; empty: the analytic prior"),
    "DYNAMICCL_PRIOR_FALLBACK": ("error", "what a DYNAMICCL_PRIOR model that cannot be used does: "
                                 "error (group creation fails, naming why) | analytic (one "
                                 "warning, the analytic prior)"),
    "DYNAMICCL_TRACE": ("", "path prefix in an existing, writable folder: write "
                        "<prefix>.rank<N>.jsonl and .trace.json at exit"),
    "DYNAMICCL_CHECK": (_core_default("check_calls"), "1: before each collective, check that "
                        "every rank issues the same one (op, dtype, sizes, root); also on with "
                        "TORCH_DISTRIBUTED_DEBUG=DETAIL"),
    "DYNAMICCL_SUMMARY": ("0", "1: print the learned-policy summary on rank 0 at exit"),
    "DYNAMICCL_DECISION_LOG": (_core_default("decision_log"), "decisions kept per group for "
                               "decision_log(), %d..%d" % DECISION_LOG_RANGE),
    "DYNAMICCL_REGRET_BUDGET": (_core_default("regret_budget"), "do no harm: what learning may "
                                "cost over the engine default, fraction of a state's time, "
                                "0 < x <= 1 (every head)"),
    "DYNAMICCL_HEADS": ("", "per-head learner settings, e.g. tp.regret_budget=0.005;"
                        "all.settle_calls=512 (python -m dynamiccl_pg config lists the keys)"),
    "DYNAMICCL_STEP_REGRESSION": (_core_default("step_regression"), "guard: step-time regression "
                                  "(beyond the step time's own noise too) that freezes "
                                  "exploration, a finite number > 0"),
    "DYNAMICCL_LOSS_STALL_ROUNDS": (_core_default("loss_stall_rounds"), "guard: rounds without "
                                    "loss progress while exploring, "
                                    "%d..%d" % LOSS_STALL_ROUNDS_RANGE),
    "DYNAMICCL_INNER": ("", "the engines under the group, device:name pairs torch has registered, "
                        "e.g. cuda:nccl-legacy; unset: cpu:gloo and whatever `nccl` means in "
                        "this torch (nccl2 on 2.15)"),
    "DYNAMICCL_NCCL_PLUGIN": (_core_default("nccl_tuning"), "1: point NCCL at the tuner plugin "
                              "(CUDA); 0: do not"),
    "DYNAMICCL_TOPOLOGY": ("", "what NCCL's cost model assumes of the cluster, overriding what the "
                           "ranks detect: nodes=4,gpus=8,intra=nvlink:450,inter=ib:50,gpu=hopper"),
    "DYNAMICCL_TEST_SLOW_ARM": ("", "tests only: ARM:MICROSECONDS delays every CPU call run on "
                                "that schedule (* for all of ours), e.g. tree:2000 (a "
                                "deliberately bad arm)"),
    "DYNAMICCL_TEST_BUSY_ARM": ("", "tests only: ARM:MICROSECONDS: every CPU call run on that "
                                "schedule (* for all of ours) slows its step's compute by that "
                                "much, paid where the step ends, unseen in the call's own duration "
                                "(an arm faster per call but slower for the step)"),
    "DYNAMICCL_TEST_ABLATE": ("", "tests and benchmarks only: learner rules switched off, by "
                              "name (comma-separated; `python -m dynamiccl_pg sim --ablate` "
                              "lists them), to measure what each buys on a real job"),
    "DYNAMICCL_EMULATE_NCCL": ("", "a simulator scenario file: CPU tensors take the NCCL branch, "
                               "run by an emulated NCCL on the scenario's cluster and truth "
                               "(tests and demos without a GPU)"),
    "DYNAMICCL_EMULATE_NCCL_VERSION": (_C.EMULATED_NCCL_DEFAULT_RELEASE, "the NCCL release the "
                                       "emulated NCCL behaves as towards the tuner: 2.28 (ABI v5) "
                                       "| 2.30 (ABI v6 first, getChunkSize)"),
    "DYNAMICCL_EMULATE_NCCL_NONBLOCKING": ("0", "1: the emulated NCCL's communicators are "
                                           "non-blocking: it calls the tuner on a thread of its "
                                           "own, as NCCL does for them"),
    "DYNAMICCL_EMULATE_NCCL_FAULT": ("", "tests only, on the ranks it is set on: no_plugin (that "
                                     "rank's emulated NCCL does not load the tuner) or "
                                     "unavailable=ALGO/PROTO[,ALGO/PROTO...]"),
}
# Read by the project's scripts (scripts/env.sh, train.sh), not by the backend; exported to every
# rank by scripts/train.sh, so they are not typos.
SCRIPT_VARS = ("DYNAMICCL_TORCH", "DYNAMICCL_VENV", "DYNAMICCL_BUILD", "DYNAMICCL_REPORT_DIR")


def _env(name: str) -> str:
    return os.environ.get(name, ENV_VARS[name][0]).strip()


def _choice(name: str, value: str, accepted) -> str:
    if value not in accepted:
        raise ConfigError(f"{name}={value!r} is not accepted; accepted: {', '.join(accepted)}")
    return value


def _int(name: str, value, bounds) -> int:
    lo, hi = bounds
    accepted = f"accepted: integers {lo}..{hi}"
    text = value.strip() if isinstance(value, str) else value
    # Strict: no bool, no float (3.7 is not 3), no "1_000" or "1e3".
    if isinstance(text, str) and re.fullmatch(r"[+-]?[0-9]+", text):
        v = int(text)
    elif isinstance(text, int) and not isinstance(text, bool):
        v = text
    else:
        raise ConfigError(f"{name}={value!r} is not an integer; {accepted}")
    if not lo <= v <= hi:
        raise ConfigError(f"{name}={v} is out of range; {accepted}")
    return v


def _float(name: str, value, minimum: float) -> float:
    accepted = f"accepted: finite numbers > {minimum}"
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} is not a number; {accepted}")
    if not (math.isfinite(v) and v > minimum):
        raise ConfigError(f"{name}={v} is out of range; {accepted}")
    return v


def _writable_trace_prefix(prefix: str) -> str:
    """The trace is written at exit: a folder that is missing or unwritable fails now instead."""
    if not prefix:
        return prefix
    folder = os.path.dirname(os.path.abspath(prefix))
    accepted = "accepted: a path prefix in an existing, writable folder"
    if not os.path.isdir(folder):
        raise ConfigError(f"DYNAMICCL_TRACE={prefix!r}: folder {folder!r} does not exist; "
                          f"{accepted}")
    try:  # permission bits do not tell (root, read-only mounts): try a file
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise ConfigError(f"DYNAMICCL_TRACE={prefix!r}: cannot write in folder {folder!r} "
                          f"({e.strerror}); {accepted}") from None
    return prefix


def _policy_file(path: str) -> str:
    if path and not os.path.isfile(path):
        raise ConfigError(f"DYNAMICCL_POLICY={path!r}: no such file; accepted: a policy file "
                          "written by dynamiccl_pg.save_policy")
    return path


def _pairs(name: str, value: str, sep: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for item in filter(None, (p.strip() for p in value.split(";"))):
        key, s, val = item.partition(sep)
        if not s or not key.strip() or not val.strip():
            raise ConfigError(f"{name}: {item!r} is not of the form key{sep}value "
                              f"(entries separated by ';')")
        out[key.strip()] = val.strip()
    return out


INNER_DEVICES = ("cpu", "cuda")
DEFAULT_INNER = {"cpu": "gloo", "cuda": "nccl"}


def parse_inner(value: str) -> Dict[str, str]:
    """``"cuda:nccl-legacy"`` -> {"cpu": "gloo", "cuda": "nccl-legacy"}: the defaults, overridden
    per device. Names are checked against torch's registry where a group is created
    (engines.py)."""
    inner = dict(DEFAULT_INNER)
    for item in filter(None, (p.strip() for p in value.split(","))):
        device, colon, name = item.partition(":")
        device, name = device.strip(), name.strip().lower()
        if not colon or device not in INNER_DEVICES or not name or name == "dynamiccl":
            raise ConfigError(f"DYNAMICCL_INNER={value!r}: {item!r} is not accepted; accepted: "
                              f"device:engine pairs, the device one of "
                              f"{', '.join(INNER_DEVICES)} and the engine one torch has "
                              "registered for it, e.g. cuda:nccl-legacy")
        inner[device] = name
    return inner


def parse_force(value: str, name: str = "DYNAMICCL_FORCE") -> Dict[str, str]:
    """``"allreduce:ring;allgather:rd"`` -> {op: arm}. Arm names are checked by the engine."""
    force = _pairs(name, value, ":")
    for op in force:
        _choice(f"{name} op", op, OPS)
    return force


def parse_role_map(value: str, name: str = "DYNAMICCL_ROLE_MAP") -> Dict[str, str]:
    roles = _pairs(name, value, "=")
    for desc, role in roles.items():
        _choice(f"{name} role for {desc!r}", role, ROLES)
    return roles


def _head_value(name: str, key: str, raw) -> float:
    setting = HEAD_SETTINGS.get(key)
    if setting is None:
        raise ConfigError(f"{name}: unknown head setting {key!r}; accepted: "
                          f"{', '.join(HEAD_SETTINGS)}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: {key}={raw!r} is not a number; accepted: "
                          f"{setting['range']}") from None
    lo, hi = setting["min"], setting["max"]
    inside = (value > lo if setting["min_open"] else value >= lo) and value <= hi
    if not inside or (setting["integer"] and value != int(value)):
        raise ConfigError(f"{name}: {key}={raw!r} is out of range; accepted: {setting['range']}")
    return value


def parse_heads(value: str, name: str = "DYNAMICCL_HEADS") -> list:
    """``"tp.regret_budget=0.005;all.settle_calls=512"`` -> [(role, key, value)]."""
    out = []
    for target, raw in _pairs(name, value, "=").items():
        role, dot, key = target.partition(".")
        if not dot:
            raise ConfigError(f"{name}: {target!r} is not role.key (e.g. tp.regret_budget)")
        _choice(f"{name} role", role, ("all",) + ROLES)
        out.append((role, key, _head_value(name, key, raw)))
    return out


def parse_test_arm(name: str) -> Optional[tuple]:
    """The variable ``name``: ``"tree:2000"`` -> ("tree", 2000); unset -> None. The arm name is
    checked by the backend."""
    value = _env(name)
    if not value:
        return None
    arm, colon, us = value.partition(":")
    if not colon or not arm or not us.isdigit() or not 1 <= int(us) <= 10_000_000:
        raise ConfigError(f"{name}={value!r} is not accepted; accepted: ARM:MICROSECONDS with "
                          "1..10000000 microseconds, e.g. tree:2000 (* for every schedule)")
    return arm, int(us)


def parse_ablated_rules(value: str, name: str = "DYNAMICCL_TEST_ABLATE") -> List[str]:
    """``"trial_resume,pair_clip"`` -> the learner rules (policy/rules.h) to switch off."""
    accepted = [rule for rule, _ in _C.learner_rules()]
    names = [n.strip() for n in value.split(",") if n.strip()] if value else []
    for n in names:
        _choice(f"{name} rule", n, accepted)
    return names


def resolve(options: Optional[Options] = None) -> dict:
    """The backend configuration for one group: environment, overridden by ``options``."""
    o = options or Options()
    mode = _choice("DYNAMICCL_MODE", o.mode or _env("DYNAMICCL_MODE"), MODES)
    cfg = {
        "mode": mode,
        "round_calls": (_int("Options.round_calls", o.round_calls, ROUND_CALLS_RANGE)
                        if o.round_calls is not None else
                        _int("DYNAMICCL_ROUND_CALLS", _env("DYNAMICCL_ROUND_CALLS"),
                             ROUND_CALLS_RANGE)),
        "cost_reduce": _choice("DYNAMICCL_COST_REDUCE",
                               o.cost_reduce or _env("DYNAMICCL_COST_REDUCE"), COST_REDUCTIONS),
        "force": parse_force(o.force if o.force is not None else _env("DYNAMICCL_FORCE")),
        "role_map": parse_role_map(o.role_map if o.role_map is not None
                                   else _env("DYNAMICCL_ROLE_MAP")),
        "decision_log": _int("DYNAMICCL_DECISION_LOG", _env("DYNAMICCL_DECISION_LOG"),
                             DECISION_LOG_RANGE),
        "heads": [("all", "regret_budget", _head_value(
            "DYNAMICCL_REGRET_BUDGET", "regret_budget",
            o.regret_budget if o.regret_budget is not None else _env("DYNAMICCL_REGRET_BUDGET")))]
        + parse_heads(o.heads if o.heads is not None else _env("DYNAMICCL_HEADS")),
        "step_regression": _float("DYNAMICCL_STEP_REGRESSION",
                                  _env("DYNAMICCL_STEP_REGRESSION"), 0.0),
        "loss_stall_rounds": _int("DYNAMICCL_LOSS_STALL_ROUNDS",
                                  _env("DYNAMICCL_LOSS_STALL_ROUNDS"), LOSS_STALL_ROUNDS_RANGE),
        "trace": bool(_writable_trace_prefix(_env("DYNAMICCL_TRACE"))),
        "prior": _prior_model(o.prior if o.prior is not None else _env("DYNAMICCL_PRIOR")),
        "check_calls": (_choice("DYNAMICCL_CHECK", _env("DYNAMICCL_CHECK"), ("0", "1")) == "1"
                        or os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL"),
        "nccl_plugin": _choice("DYNAMICCL_NCCL_PLUGIN", _env("DYNAMICCL_NCCL_PLUGIN"),
                               ("0", "1")) == "1",
        "topology_override": _topology_override(),
        "test_slow_arm": parse_test_arm("DYNAMICCL_TEST_SLOW_ARM"),
        "test_busy_arm": parse_test_arm("DYNAMICCL_TEST_BUSY_ARM"),
        "ablate": parse_ablated_rules(_env("DYNAMICCL_TEST_ABLATE")),
        "emulate_nccl": _emulated_scenario(_env("DYNAMICCL_EMULATE_NCCL")),
        "emulate_nccl_fault": parse_emulation_fault(_env("DYNAMICCL_EMULATE_NCCL_FAULT")),
        "emulate_nccl_version": _choice("DYNAMICCL_EMULATE_NCCL_VERSION",
                                        _env("DYNAMICCL_EMULATE_NCCL_VERSION"),
                                        _C.EMULATED_NCCL_RELEASES),
        "emulate_nccl_nonblocking": _choice("DYNAMICCL_EMULATE_NCCL_NONBLOCKING",
                                            _env("DYNAMICCL_EMULATE_NCCL_NONBLOCKING"),
                                            ("0", "1")) == "1",
        "inner": parse_inner(_env("DYNAMICCL_INNER")),
    }
    _choice("DYNAMICCL_SUMMARY", _env("DYNAMICCL_SUMMARY"), ("0", "1"))
    _policy_file(_env("DYNAMICCL_POLICY"))
    return cfg


_PRIOR_WARNED = set()


def _prior_model(path: str) -> str:
    """The learned prior's file, checked by the C++ loader the backend uses (format, schema and
    catalog versions, finite outputs); "" = the analytic prior. A model that cannot be used is a
    ConfigError, or with DYNAMICCL_PRIOR_FALLBACK=analytic one warning and the analytic prior."""
    fallback = _choice("DYNAMICCL_PRIOR_FALLBACK", _env("DYNAMICCL_PRIOR_FALLBACK"),
                       ("error", "analytic"))
    if not path:
        return path
    try:
        _C.PriorModel(path)
    except ValueError as e:
        if fallback == "error":
            raise ConfigError(f"DYNAMICCL_PRIOR={path!r}: {e} (DYNAMICCL_PRIOR_FALLBACK=analytic "
                              "runs on the analytic prior instead)") from None
        if path not in _PRIOR_WARNED:  # once per process, not once per group
            _PRIOR_WARNED.add(path)
            warnings.warn(f"{e}; DYNAMICCL_PRIOR_FALLBACK=analytic: using the analytic prior",
                          stacklevel=2)
        return ""
    return path


def _emulated_scenario(path: str) -> str:
    """The scenario file of DYNAMICCL_EMULATE_NCCL, checked whole now (it needs torch: imported
    late); "" = no emulation."""
    if not path:
        return path
    from .sim.scenario import ScenarioError, load_scenario
    try:
        load_scenario(path)
    except (OSError, ScenarioError) as e:
        raise ConfigError(f"DYNAMICCL_EMULATE_NCCL={path!r}: {e}; accepted: a simulator "
                          "scenario file (benchmarks/scenarios/)") from None
    return path


def parse_emulation_fault(value: str) -> dict:
    """``"no_plugin"`` -> {"skip_plugin": True}; ``"unavailable=ring/LL128,tree/LL"`` ->
    {"unavailable": ["ring/LL128", "tree/LL"]}; "" -> {}."""
    if not value:
        return {}
    if value == "no_plugin":
        return {"skip_plugin": True}
    kind, eq, pairs = value.partition("=")
    if kind == "unavailable" and eq and pairs:
        return {"unavailable": [p.strip() for p in pairs.split(",") if p.strip()]}
    raise ConfigError(f"DYNAMICCL_EMULATE_NCCL_FAULT={value!r} is not accepted; accepted: "
                      "no_plugin, unavailable=ALGO/PROTO[,ALGO/PROTO...]")


def _topology_override() -> dict:
    return parse_override(_env("DYNAMICCL_TOPOLOGY"))


# What shapes decisions, hence must be identical on every rank of a group (checked at creation).
_DECISION_SETTINGS = ("mode", "round_calls", "cost_reduce", "force", "role_map", "heads",
                      "step_regression", "loss_stall_rounds", "nccl_plugin", "topology_override",
                      "test_slow_arm", "test_busy_arm", "ablate", "emulate_nccl", "check_calls",
                      "inner")
# NCCL's own choices: set on some ranks only, tuning would step aside there and not elsewhere
# (NCCL_ALGO/PROTO), the channel caps offered, which follow NCCL's channel bounds, would differ,
# or the ranks would run different NCCL engines (TORCH_DIST_USE_NCCL2).
_NCCL_CHOICES = ("NCCL_ALGO", "NCCL_PROTO", *NCCL_CHANNEL_BOUNDS.values(), "TORCH_DIST_USE_NCCL2")


def fingerprint(cfg: dict) -> dict:
    """The settings and versions every rank of a group must share, as a flat dict."""
    import hashlib

    import torch
    out = {name: cfg[name] for name in _DECISION_SETTINGS}
    policy = _env("DYNAMICCL_POLICY")
    if policy:
        try:
            with open(policy, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()[:12]
                out["DYNAMICCL_POLICY"] = f"{policy} (sha256 {digest})"
        except OSError as e:
            out["DYNAMICCL_POLICY"] = f"{policy} (unreadable: {e.strerror})"
    else:
        out["DYNAMICCL_POLICY"] = ""
    # The learned prior by content (ranks may keep their copy at different paths); "analytic" on
    # a rank without one, or that fell back to the analytic prior.
    if cfg["prior"]:
        with open(cfg["prior"], "rb") as f:
            out["prior"] = "sha256 " + hashlib.sha256(f.read()).hexdigest()[:12]
    else:
        out["prior"] = "analytic"
    if torch.cuda.is_available() or cfg["emulate_nccl"]:
        out.update({name: os.environ.get(name, "") for name in _NCCL_CHOICES})
    out["torch"] = torch.__version__
    out["nccl"] = (".".join(map(str, torch.cuda.nccl.version()))
                   if torch.cuda.is_available() else None)
    out["dynamiccl"] = LIBRARY_VERSION
    return out


def validate_environment() -> None:
    """Fails fast on any bad DYNAMICCL_* variable, and on unknown DYNAMICCL_* names (typos)."""
    for name in os.environ:
        if name.startswith("DYNAMICCL_") and name not in ENV_VARS and name not in SCRIPT_VARS:
            raise ConfigError(f"unknown variable {name}; accepted: {', '.join(sorted(ENV_VARS))}")
    resolve()
