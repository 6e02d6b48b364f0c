"""Scenario files for the simulator: strict parsing and validation.

A scenario is a JSON object (schema: benchmarks/scenarios/README.md). Every key is checked:
an unknown key or a bad value raises ScenarioError naming the key path, the value, and what is
accepted. All problems of a file are reported at once. The names it accepts (roles, ops, NCCL
algorithms and protocols, learner head settings) are the core's, read from ``dynamiccl_pg._C``;
``Scenario.to_spec()`` turns the result into the plain C++ struct of ``dynamiccl_pg._C.sim``.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = [
    "ScenarioError",
    "Scenario",
    "load_scenario",
    "parse_scenario",
    "scenario_files",
    "parse_size",
]

from dynamiccl_pg import _C

_VOCABULARY = _C.vocabulary()
ALGOS = tuple(_VOCABULARY["nccl_algos"])
PROTOS = tuple(_VOCABULARY["nccl_protos"])
ROLES = tuple(_VOCABULARY["roles"])
# The collectives a workload entry may name: those NCCL's tuner sees, and pipeline sends.
OPS = tuple(op for op in _VOCABULARY["ops"]
            if op in ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "send"))
GPUS = ("volta", "ampere", "hopper", "blackwell")
INTRA_TYPES = ("nvlink", "pcie")
INTER_TYPES = ("ib", "roce", "ethernet")
KINDS = ("call", "ddp", "fsdp", "tp", "pp")
PHASES = ("fwd", "bwd", "post")
HEAD_SETTINGS = {h["name"]: h for h in _C.head_settings()}  # the learner's table
HEAD_KEYS = {name: int if h["integer"] else float for name, h in HEAD_SETTINGS.items()}
EXPECT = ("gain", "no_gain")

# Default inter-node link of a single-node scenario (never used: one node has no network).
_SINGLE_NODE_INTER = {"type": "ib", "bw_GBps": 50.0, "lat_us": 2.0}

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KiB|MB|MiB|GB|GiB)\s*$")
_UNITS = {"B": 1, "KB": 10**3, "KiB": 2**10, "MB": 10**6, "MiB": 2**20, "GB": 10**9, "GiB": 2**30}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message lists every problem found."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = list(problems)
        super().__init__(f"{source}: invalid scenario:\n  " + "\n  ".join(self.problems))


def parse_size(value: Any) -> int:
    """Bytes from an integer or a string such as "64KiB", "1.5MB" (KB/MB/GB are decimal)."""
    if isinstance(value, bool):
        raise ValueError("expected a byte count, got a boolean")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"expected a byte count >= 1, got {value}")
        return value
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if not m:
            raise ValueError(
                f"expected a byte count such as 4096 or \"64KiB\" (units B, KB, KiB, MB, MiB, "
                f"GB, GiB), got {value!r}"
            )
        n = float(m.group(1)) * _UNITS[m.group(2)]
        if n < 1 or n != math.floor(n):
            raise ValueError(f"{value!r} is not a whole number of bytes >= 1")
        return int(n)
    raise ValueError(f"expected a byte count (integer or string like \"64KiB\"), got {value!r}")


# ---- dataclasses: the validated scenario, in plain Python ----------------------------------


@dataclass
class Link:
    type: str
    bw_GBps: float
    lat_us: float = 0.0


@dataclass
class Topology:
    nodes: int
    gpus_per_node: int
    intra: Link
    inter: Link
    gpu: str = "hopper"
    cpu: str = "intel"
    nvswitch: bool = True
    sharp: bool = False
    channels: int = 0

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass
class Congestion:
    from_step: int
    to_step: int
    link: str
    bw_factor: float = 1.0
    lat_factor: float = 1.0


@dataclass
class Group:
    name: str = ""
    nodes: int = 0
    gpus_per_node: int = 0


@dataclass
class WorkloadEntry:
    kind: str = "call"
    role: str = ""
    op: str = ""
    bytes: int = 0
    per_step: int = 1
    phase: str = "post"
    group: Group = field(default_factory=Group)
    param_bytes: list[int] = field(default_factory=list)
    bucket_cap_mb: float = 25.0
    first_bucket_mb: float = 1.0
    layers: int = 0
    layer_bytes: int = 0
    reshard_after_forward: bool = True
    activation_bytes: int = 0
    calls_per_layer: int = 2


@dataclass
class Scenario:
    name: str
    seed: int
    steps: int
    topology: Topology
    workload: list[WorkloadEntry]
    description: str = ""
    microbatches: int = 1
    truth: dict[str, dict[str, float]] = field(default_factory=dict)  # "algo/proto" -> factors
    noise_sigma: float = 0.0
    outlier_rate: float = 0.0
    outlier_factor: float = 5.0
    arrival_skew_us: float = 0.0
    overlap: float = 0.0
    congestion: list[Congestion] = field(default_factory=list)
    channel_saturation: float = 1.0
    channel_contention: float = 0.0
    lat_per_channel_us: float = 0.0
    channel_caps: list[int] | None = None  # None = derived from the group's channel count
    round_calls: int = 16
    ranks_sampled: int = 4
    round_cost_us: float = 0.0
    heads: dict[str, dict[str, float]] = field(default_factory=dict)  # role -> key -> value
    expect: str | None = None  # "gain" / "no_gain"; None = judged from the oracle
    source: str = ""

    def to_spec(self):
        """The plain C++ ScenarioSpec (needs the compiled module dynamiccl_pg._C)."""
        from dynamiccl_pg._C import sim as _sim  # the lead's build puts _C in the package

        s = _sim.ScenarioSpec()
        s.name = self.name
        s.seed = self.seed
        s.steps = self.steps
        s.microbatches = self.microbatches
        t = _sim.TopologySpec()
        t.nodes = self.topology.nodes
        t.gpus_per_node = self.topology.gpus_per_node
        t.gpu = self.topology.gpu
        t.cpu = self.topology.cpu
        t.intra = _link(_sim, self.topology.intra)
        t.inter = _link(_sim, self.topology.inter)
        t.nvswitch = self.topology.nvswitch
        t.sharp = self.topology.sharp
        t.channels = self.topology.channels
        s.topology = t
        truth = []
        for key, f in self.truth.items():
            e = _sim.TruthEntry()
            e.algo, e.proto = key.split("/")
            e.bw = f.get("bw", 1.0)
            e.lat = f.get("lat", 1.0)
            truth.append(e)
        s.truth = truth
        s.noise_sigma = self.noise_sigma
        s.outlier_rate = self.outlier_rate
        s.outlier_factor = self.outlier_factor
        s.arrival_skew_us = self.arrival_skew_us
        s.overlap = self.overlap
        cm = _sim.ChannelModelSpec()
        cm.saturation = self.channel_saturation
        cm.contention = self.channel_contention
        cm.lat_per_channel_us = self.lat_per_channel_us
        s.channel_model = cm
        cong = []
        for c in self.congestion:
            x = _sim.CongestionSpec()
            x.from_step, x.to_step, x.link = c.from_step, c.to_step, c.link
            x.bw_factor, x.lat_factor = c.bw_factor, c.lat_factor
            cong.append(x)
        s.congestion = cong
        work = []
        for w in self.workload:
            x = _sim.WorkloadSpec()
            for name in ("kind", "role", "op", "bytes", "per_step", "phase", "param_bytes",
                         "bucket_cap_mb", "first_bucket_mb", "layers", "layer_bytes",
                         "reshard_after_forward", "activation_bytes", "calls_per_layer"):
                setattr(x, name, getattr(w, name))
            g = _sim.GroupSpec()
            g.name, g.nodes, g.gpus_per_node = w.group.name, w.group.nodes, w.group.gpus_per_node
            x.group = g
            work.append(x)
        s.workload = work
        s.channel_caps = list(self.channel_caps or [])
        s.derive_channel_caps = self.channel_caps is None
        s.round_calls = self.round_calls
        s.ranks_sampled = self.ranks_sampled
        s.round_cost_us = self.round_cost_us
        heads = []
        for role, keys in self.heads.items():
            for key, value in keys.items():
                h = _sim.HeadOverride()
                h.role, h.key, h.value = role, key, float(value)
                heads.append(h)
        s.heads = heads
        return s


def _link(_sim, link: Link):
    x = _sim.LinkSpec()
    x.type, x.bw_GBps, x.lat_us = link.type, link.bw_GBps, link.lat_us
    return x


# ---- validation ----------------------------------------------------------------------------


class _Checker:
    """Collects problems as "path: what is wrong (accepted: ...)"."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, path: str, msg: str) -> None:
        self.problems.append(f"{path}: {msg}")

    def obj(self, path: str, value: Any, required: tuple[str, ...],
            optional: tuple[str, ...]) -> dict | None:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {_show(value)}")
            return None
        allowed = required + optional
        for key in value:
            if key not in allowed:
                self.fail(_join(path, key),
                          f"unknown key (accepted: {', '.join(allowed)})")
        for key in required:
            if key not in value:
                self.fail(_join(path, key), "missing (required)")
        return value

    def integer(self, path: str, value: Any, lo: int, hi: int | None = None) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected an integer, got {_show(value)}")
            return None
        if value < lo or (hi is not None and value > hi):
            rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            self.fail(path, f"{value} is out of range (accepted: integers {rng})")
            return None
        return value

    def number(self, path: str, value: Any, lo: float, hi: float | None = None,
               lo_open: bool = False) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(path, f"expected a number, got {_show(value)}")
            return None
        v = float(value)
        bad = not math.isfinite(v) or (v <= lo if lo_open else v < lo) or (
            hi is not None and v > hi)
        if bad:
            left = "(" if lo_open else "["
            rng = f"{left}{lo}, {hi}]" if hi is not None else (f"> {lo}" if lo_open else f">= {lo}")
            self.fail(path, f"{value} is out of range (accepted: numbers {rng})")
            return None
        return v

    def choice(self, path: str, value: Any, choices: tuple[str, ...]) -> str | None:
        if not isinstance(value, str) or value not in choices:
            self.fail(path, f"{_show(value)} is not accepted (accepted: {', '.join(choices)})")
            return None
        return value

    def boolean(self, path: str, value: Any) -> bool | None:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_show(value)}")
            return None
        return value

    def string(self, path: str, value: Any) -> str | None:
        if not isinstance(value, str):
            self.fail(path, f"expected a string, got {_show(value)}")
            return None
        return value

    def size(self, path: str, value: Any) -> int | None:
        try:
            return parse_size(value)
        except ValueError as e:
            self.fail(path, str(e))
            return None

    def listof(self, path: str, value: Any, item: Callable[[str, Any], Any],
               nonempty: bool = False) -> list:
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_show(value)}")
            return []
        if nonempty and not value:
            self.fail(path, "expected at least one entry")
        return [item(f"{path}[{i}]", v) for i, v in enumerate(value)]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _get(c: _Checker, d: dict, key: str, path: str, fn: Callable, default: Any) -> Any:
    if key not in d:
        return default
    v = fn(_join(path, key), d[key])
    return default if v is None else v


def _parse_link(c: _Checker, path: str, v: Any, types: tuple[str, ...]) -> Link:
    d = c.obj(path, v, ("type", "bw_GBps"), ("lat_us",))
    if d is None:
        return Link(types[0], 1.0)
    return Link(
        type=_get(c, d, "type", path, lambda p, x: c.choice(p, x, types), types[0]),
        bw_GBps=_get(c, d, "bw_GBps", path, lambda p, x: c.number(p, x, 0, 1e6, lo_open=True),
                     1.0),
        lat_us=_get(c, d, "lat_us", path, lambda p, x: c.number(p, x, 0, 1e6), 0.0),
    )


def _parse_topology(c: _Checker, v: Any) -> Topology | None:
    path = "topology"
    d = c.obj(path, v, ("nodes", "gpus_per_node", "intra"),
              ("inter", "gpu", "cpu", "nvswitch", "sharp", "channels"))
    if d is None:
        return None
    nodes = _get(c, d, "nodes", path, lambda p, x: c.integer(p, x, 1, 100000), 1)
    gpn = _get(c, d, "gpus_per_node", path, lambda p, x: c.integer(p, x, 1, 72), 1)
    if nodes * gpn < 2:
        c.fail(path, "needs at least 2 ranks (nodes x gpus_per_node)")
    if nodes * gpn > 100000:
        c.fail(path, f"{nodes * gpn} ranks is more than the 100000 supported")
    intra = _parse_link(c, _join(path, "intra"), d.get("intra", {}), INTRA_TYPES)
    if "inter" in d:
        inter = _parse_link(c, _join(path, "inter"), d["inter"], INTER_TYPES)
    else:
        if nodes > 1:
            c.fail(_join(path, "inter"), "missing (required when nodes > 1)")
        inter = Link(**_SINGLE_NODE_INTER)
    t = Topology(
        nodes=nodes, gpus_per_node=gpn, intra=intra, inter=inter,
        gpu=_get(c, d, "gpu", path, lambda p, x: c.choice(p, x, GPUS), "hopper"),
        cpu=_get(c, d, "cpu", path, lambda p, x: c.choice(p, x, ("intel", "amd")), "intel"),
        nvswitch=_get(c, d, "nvswitch", path, c.boolean, True),
        sharp=_get(c, d, "sharp", path, c.boolean, False),
        channels=_get(c, d, "channels", path, lambda p, x: c.integer(p, x, 0, 64), 0),
    )
    if t.sharp and t.inter.type != "ib":
        c.fail(_join(path, "sharp"), "in-network reduction needs inter.type 'ib'")
    return t


def _canonical_truth_key(c: _Checker, path: str, key: str) -> str | None:
    parts = key.split("/")
    if len(parts) != 2:
        c.fail(path, f"key {key!r} must be \"algo/proto\" (algo: {', '.join(ALGOS)}, *; "
                     f"proto: {', '.join(PROTOS)}, *)")
        return None
    algo, proto = parts[0].strip().lower(), parts[1].strip()
    ok = True
    if algo != "*" and algo not in ALGOS:
        c.fail(path, f"unknown algorithm {parts[0]!r} (accepted: {', '.join(ALGOS)}, *)")
        ok = False
    canon = {p.lower(): p for p in PROTOS}
    if proto != "*" and proto.lower() not in canon:
        c.fail(path, f"unknown protocol {parts[1]!r} (accepted: {', '.join(PROTOS)}, *)")
        ok = False
    if not ok:
        return None
    return f"{algo}/{canon.get(proto.lower(), '*')}"


def _parse_truth(c: _Checker, v: Any) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    if not isinstance(v, dict):
        c.fail("truth", f"expected an object of \"algo/proto\": {{bw, lat}}, got {_show(v)}")
        return out
    for key, factors in v.items():
        path = f"truth[{key!r}]"
        canon = _canonical_truth_key(c, path, key)
        d = c.obj(path, factors, (), ("bw", "lat"))
        if canon is None or d is None:
            continue
        if not d:
            c.fail(path, "give bw and/or lat multipliers")
        if canon in out:
            c.fail(path, f"duplicates {canon!r}")
            continue
        f = {}
        for k in ("bw", "lat"):
            if k in d:
                x = c.number(_join(path, k), d[k], 0, 1000, lo_open=True)
                if x is not None:
                    f[k] = x
        out[canon] = f
    return out


def _parse_congestion(c: _Checker, path: str, v: Any,
                      steps: int | None) -> Congestion | None:
    d = c.obj(path, v, ("from_step", "to_step", "link", "bw_factor"), ("lat_factor",))
    if d is None:
        return None
    x = Congestion(
        from_step=_get(c, d, "from_step", path, lambda p, y: c.integer(p, y, 0), 0),
        to_step=_get(c, d, "to_step", path, lambda p, y: c.integer(p, y, 1), 1),
        link=_get(c, d, "link", path, lambda p, y: c.choice(p, y, ("intra", "inter")), "inter"),
        bw_factor=_get(c, d, "bw_factor", path,
                       lambda p, y: c.number(p, y, 0, 1000, lo_open=True), 1.0),
        lat_factor=_get(c, d, "lat_factor", path,
                        lambda p, y: c.number(p, y, 0, 1000, lo_open=True), 1.0),
    )
    if x.to_step <= x.from_step:
        c.fail(path, f"to_step ({x.to_step}) must be greater than from_step ({x.from_step})")
    if steps is not None and x.from_step >= steps:  # (unknown when steps itself is bad)
        c.fail(_join(path, "from_step"), f"{x.from_step} is not before the end (steps={steps})")
    return x


def _parse_group(c: _Checker, path: str, v: Any, topo: Topology | None) -> Group:
    d = c.obj(path, v, (), ("name", "nodes", "gpus_per_node"))
    if d is None:
        return Group()
    g = Group(
        name=_get(c, d, "name", path, c.string, ""),
        nodes=_get(c, d, "nodes", path, lambda p, x: c.integer(p, x, 1, 100000), 0),
        gpus_per_node=_get(c, d, "gpus_per_node", path, lambda p, x: c.integer(p, x, 1, 72), 0),
    )
    if topo is not None:
        if g.nodes > topo.nodes:
            c.fail(_join(path, "nodes"), f"{g.nodes} exceeds topology.nodes ({topo.nodes})")
        if g.gpus_per_node > topo.gpus_per_node:
            c.fail(_join(path, "gpus_per_node"),
                   f"{g.gpus_per_node} exceeds topology.gpus_per_node ({topo.gpus_per_node})")
    return g


_KIND_KEYS = {
    "call": (("role", "op", "bytes"), ("per_step", "phase", "group")),
    "ddp": ((), ("param_bytes", "layers", "layer_bytes", "bucket_cap_mb", "first_bucket_mb",
                 "group")),
    "fsdp": (("layers", "layer_bytes"), ("reshard_after_forward", "group")),
    "tp": (("layers", "activation_bytes"), ("calls_per_layer", "group")),
    "pp": (("activation_bytes",), ("group",)),
}


def _parse_workload_entry(c: _Checker, path: str, v: Any, topo: Topology | None) -> WorkloadEntry:
    w = WorkloadEntry()
    if not isinstance(v, dict):
        c.fail(path, f"expected an object, got {_show(v)}")
        return w
    kind = v.get("kind", "call")
    if c.choice(_join(path, "kind"), kind, KINDS) is None:
        return w
    w.kind = kind
    required, optional = _KIND_KEYS[kind]
    d = c.obj(path, v, required, optional + ("kind",))
    if d is None:
        return w
    pos_int = lambda p, x: c.integer(p, x, 1, 10**6)  # noqa: E731
    if kind == "call":
        w.role = _get(c, d, "role", path, lambda p, x: c.choice(p, x, ROLES), "")
        w.op = _get(c, d, "op", path, lambda p, x: c.choice(p, x, OPS), "")
        w.bytes = _get(c, d, "bytes", path, c.size, 0)
        w.per_step = _get(c, d, "per_step", path, pos_int, 1)
        w.phase = _get(c, d, "phase", path, lambda p, x: c.choice(p, x, PHASES), "post")
    elif kind == "ddp":
        has_params = "param_bytes" in d
        has_layers = "layers" in d or "layer_bytes" in d
        if has_params == has_layers:
            c.fail(path, "give either param_bytes, or layers and layer_bytes")
        if has_params:
            w.param_bytes = [x for x in c.listof(_join(path, "param_bytes"), d["param_bytes"],
                                                  c.size, nonempty=True) if x is not None]
        elif has_layers:
            for key in ("layers", "layer_bytes"):
                if key not in d:
                    c.fail(_join(path, key), "missing (required with the other)")
            w.layers = _get(c, d, "layers", path, pos_int, 0)
            w.layer_bytes = _get(c, d, "layer_bytes", path, c.size, 0)
        w.bucket_cap_mb = _get(c, d, "bucket_cap_mb", path,
                               lambda p, x: c.number(p, x, 0, 1e6, lo_open=True), 25.0)
        w.first_bucket_mb = _get(c, d, "first_bucket_mb", path,
                                 lambda p, x: c.number(p, x, 0, 1e6, lo_open=True), 1.0)
    elif kind == "fsdp":
        w.layers = _get(c, d, "layers", path, pos_int, 0)
        w.layer_bytes = _get(c, d, "layer_bytes", path, c.size, 0)
        w.reshard_after_forward = _get(c, d, "reshard_after_forward", path, c.boolean, True)
    elif kind == "tp":
        w.layers = _get(c, d, "layers", path, pos_int, 0)
        w.activation_bytes = _get(c, d, "activation_bytes", path, c.size, 0)
        w.calls_per_layer = _get(c, d, "calls_per_layer", path,
                                 lambda p, x: c.integer(p, x, 1, 64), 2)
    elif kind == "pp":
        w.activation_bytes = _get(c, d, "activation_bytes", path, c.size, 0)
    if "group" in d:
        w.group = _parse_group(c, _join(path, "group"), d["group"], topo)
    return w


def _parse_heads(c: _Checker, v: Any) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    roles = ("all",) + ROLES
    d = c.obj("learner", v, (), roles)
    if d is None:
        return out
    for role, keys in d.items():
        path = _join("learner", role)
        kd = c.obj(path, keys, (), tuple(HEAD_KEYS))
        if kd is None or role not in roles:
            continue
        out[role] = {}
        for key, value in kd.items():
            if key not in HEAD_KEYS:
                continue
            h = HEAD_SETTINGS[key]
            if h["integer"]:
                x = c.integer(_join(path, key), value, int(h["min"]), int(min(h["max"], 2**31 - 1)))
            else:
                x = c.number(_join(path, key), value, h["min"], h["max"], lo_open=h["min_open"])
            if x is not None:
                out[role][key] = x
    return out


_TOP_REQUIRED = ("name", "seed", "steps", "topology", "workload")
_TOP_OPTIONAL = ("description", "microbatches", "truth", "noise_sigma", "outlier_rate",
                 "outlier_factor", "arrival_skew_us", "overlap", "congestion",
                 "channel_model", "channel_caps", "consensus", "learner", "expect")


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate a decoded JSON object; raises ScenarioError listing every problem."""
    c = _Checker()
    d = c.obj("", data, _TOP_REQUIRED, _TOP_OPTIONAL)
    if d is None:
        raise ScenarioError(source, c.problems)
    name = _get(c, d, "name", "", c.string, "")
    if "name" in d and isinstance(d["name"], str) and not _NAME_RE.match(name):
        c.fail("name", f"{name!r} must be 1-64 characters of letters, digits, '_', '.', '-'")
    seed = _get(c, d, "seed", "", lambda p, x: c.integer(p, x, 0, 2**63 - 1), 0)
    steps = _get(c, d, "steps", "", lambda p, x: c.integer(p, x, 1, 10**7), None)
    topo = _parse_topology(c, d["topology"]) if "topology" in d else None
    workload = (c.listof("workload", d["workload"],
                         lambda p, x: _parse_workload_entry(c, p, x, topo), nonempty=True)
                if "workload" in d else [])
    sc = Scenario(
        name=name, seed=seed, steps=steps or 1,
        topology=topo or Topology(1, 2, Link("nvlink", 1.0), Link(**_SINGLE_NODE_INTER)),
        workload=workload, source=source,
    )
    sc.description = _get(c, d, "description", "", c.string, "")
    sc.microbatches = _get(c, d, "microbatches", "", lambda p, x: c.integer(p, x, 1, 1024), 1)
    if "truth" in d:
        sc.truth = _parse_truth(c, d["truth"])
    sc.noise_sigma = _get(c, d, "noise_sigma", "", lambda p, x: c.number(p, x, 0, 2), 0.0)
    sc.outlier_rate = _get(c, d, "outlier_rate", "", lambda p, x: c.number(p, x, 0, 0.5), 0.0)
    sc.outlier_factor = _get(c, d, "outlier_factor", "", lambda p, x: c.number(p, x, 1, 1000),
                             5.0)
    sc.arrival_skew_us = _get(c, d, "arrival_skew_us", "", lambda p, x: c.number(p, x, 0, 1e9),
                              0.0)
    sc.overlap = _get(c, d, "overlap", "", lambda p, x: c.number(p, x, 0, 1), 0.0)
    if "congestion" in d:
        sc.congestion = [x for x in c.listof(
            "congestion", d["congestion"], lambda p, x: _parse_congestion(c, p, x, steps))
            if x is not None]
    if "channel_model" in d:
        cm = c.obj("channel_model", d["channel_model"], (),
                   ("saturation", "contention", "lat_per_channel_us"))
        if cm is not None:
            sc.channel_saturation = _get(c, cm, "saturation", "channel_model",
                                         lambda p, x: c.number(p, x, 0, 1, lo_open=True), 1.0)
            sc.channel_contention = _get(c, cm, "contention", "channel_model",
                                         lambda p, x: c.number(p, x, 0, 0.99), 0.0)
            sc.lat_per_channel_us = _get(c, cm, "lat_per_channel_us", "channel_model",
                                         lambda p, x: c.number(p, x, 0, 1e6), 0.0)
    if "channel_caps" in d:
        sc.channel_caps = [x for x in c.listof(
            "channel_caps", d["channel_caps"], lambda p, x: c.integer(p, x, 1, 64))
            if x is not None]
    if "consensus" in d:
        cd = c.obj("consensus", d["consensus"], (), ("round_calls", "ranks_sampled",
                                                     "round_cost_us"))
        if cd is not None:
            sc.round_calls = _get(c, cd, "round_calls", "consensus",
                                  lambda p, x: c.integer(p, x, 1, 65536), 16)
            sc.ranks_sampled = _get(c, cd, "ranks_sampled", "consensus",
                                    lambda p, x: c.integer(p, x, 1, 64), 4)
            sc.round_cost_us = _get(c, cd, "round_cost_us", "consensus",
                                    lambda p, x: c.number(p, x, 0, 1e9), 0.0)
    if "learner" in d:
        sc.heads = _parse_heads(c, d["learner"])
    if "expect" in d:
        sc.expect = _get(c, d, "expect", "", lambda p, x: c.choice(p, x, EXPECT), None)
    _check_groups(c, sc)
    if c.problems:
        raise ScenarioError(source, c.problems)
    return sc


_ROLE_OF_KIND = {"ddp": "dp", "fsdp": "fsdp_ag", "tp": "tp", "pp": "pp"}


def _check_groups(c: _Checker, sc: Scenario) -> None:
    """Group names must mean one shape; sends need two ranks. Mirrors the C++ defaults."""
    topo = sc.topology
    shapes: dict[str, tuple[int, int]] = {}
    for i, w in enumerate(sc.workload):
        role = w.role if w.kind == "call" else _ROLE_OF_KIND[w.kind]
        if role == "tp":
            name, shape = "tp", (1, topo.gpus_per_node)
        elif role == "pp":
            name, shape = "pp", ((2, 1) if topo.nodes >= 2 else (1, 2))
        elif role in ("dp", "fsdp_ag", "fsdp_rs"):
            name, shape = "dp", (topo.nodes, topo.gpus_per_node)
        else:
            name, shape = "world", (topo.nodes, topo.gpus_per_node)
        name = w.group.name or name
        if w.group.name and name in shapes:  # a named group keeps its shape
            shape = shapes[name]
        shape = (w.group.nodes or shape[0], w.group.gpus_per_node or shape[1])
        path = f"workload[{i}].group"
        if shape[0] * shape[1] < 2:
            c.fail(path, f"group {name!r} has {shape[0] * shape[1]} rank (accepted: >= 2)")
        if (w.kind == "pp" or w.op == "send") and shape[0] * shape[1] != 2:
            c.fail(path, f"a send needs a group of exactly 2 ranks, {name!r} has "
                         f"{shape[0] * shape[1]}")
        if name in shapes and shapes[name] != shape:
            c.fail(path, f"group {name!r} is {shape[0]}x{shape[1]} here but "
                         f"{shapes[name][0]}x{shapes[name][1]} in an earlier entry")
        shapes.setdefault(name, shape)


def load_scenario(path: str | os.PathLike) -> Scenario:
    """Read and validate one scenario file."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise ScenarioError(path, [f"not valid JSON: {e}"]) from None
    except OSError as e:
        raise ScenarioError(path, [f"cannot read: {e.strerror}"]) from None
    return parse_scenario(data, source=path)


def scenario_files(paths: list[str]) -> list[str]:
    """Files named directly, plus every *.json in directories (sorted). Raises FileNotFoundError."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".json"))
            if not found:
                raise FileNotFoundError(f"{p}: no *.json scenario files in this directory")
            out.extend(found)
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such scenario file or directory")
    return out
