"""The cluster a group runs on, as NCCL's cost model needs it: nodes and GPUs per node, the GPU
generation, the link between local GPUs and the network (the NCCL prior: docs/architecture.md,
"Priors").

Local facts (host, GPU, NVLink or PCIe) are agreed through the group's store, so every rank
builds the same prior; ``DYNAMICCL_TOPOLOGY`` overrides what a user knows better, e.g.
``nodes=4,gpus=8,intra=nvlink:450,inter=ib:50,gpu=hopper``.
"""

from __future__ import annotations

import os
import socket
from typing import Dict, List

import torch

from . import _C
from .agreement import agree
from .errors import ConfigError

_VOCAB = _C.vocabulary()
GPUS = tuple(_VOCAB["gpus"])  # NCCL's compute-capability classes, oldest first
CPUS = tuple(_VOCAB["cpus"])
INTRA = tuple(_VOCAB["intra_links"])
INTER = tuple(_VOCAB["inter_links"])
_KEYS = ("nodes", "gpus", "gpu", "cpu", "intra", "inter", "nvswitch", "sharp", "channels")
# NCCL's channel bounds, as the described topology's keys (nccl_channel_bounds).
NCCL_CHANNEL_BOUNDS = {"min_channels": "NCCL_MIN_NCHANNELS", "max_channels": "NCCL_MAX_NCHANNELS"}


def _gpu_class(major: int) -> str:
    """Compute capability 7.x, 8.x, 9.x, 10+ -> the GPUS class."""
    return GPUS[min(max(major - 7, 0), len(GPUS) - 1)]


def _link(name: str, value: str, accepted) -> Dict:
    kind, _, bw = value.partition(":")
    if kind not in accepted:
        raise ConfigError(f"DYNAMICCL_TOPOLOGY: {name}={value!r}: link {kind!r} is not accepted; "
                          f"accepted: {', '.join(accepted)} (optionally :<GB/s>)")
    link = {"type": kind}
    if bw:
        try:
            link["bw_GBps"] = float(bw)
        except ValueError:
            link["bw_GBps"] = -1.0
        if not link["bw_GBps"] > 0:
            raise ConfigError(f"DYNAMICCL_TOPOLOGY: {name}={value!r}: bandwidth {bw!r} is not a "
                              "positive number of GB/s")
    return link


def parse_override(value: str) -> Dict:
    """``"nodes=4,gpus=8,intra=nvlink:450,inter=ib:50,gpu=hopper"`` -> the keys given."""
    out: Dict = {}
    for item in filter(None, (p.strip() for p in value.split(","))):
        key, eq, val = item.partition("=")
        key, val = key.strip(), val.strip()
        if not eq or key not in _KEYS:
            raise ConfigError(f"DYNAMICCL_TOPOLOGY: {item!r} is not key=value with a key among "
                              f"{', '.join(_KEYS)}")
        if key in ("nodes", "gpus", "channels"):
            if not val.isdigit() or (key != "channels" and int(val) < 1) or int(val) > 100000:
                raise ConfigError(f"DYNAMICCL_TOPOLOGY: {key}={val!r}; accepted: an integer "
                                  f"{'0-64' if key == 'channels' else '>= 1'}")
            out[key] = int(val)
        elif key == "gpu":
            if val not in GPUS:
                raise ConfigError(f"DYNAMICCL_TOPOLOGY: gpu={val!r}; accepted: {', '.join(GPUS)}")
            out[key] = val
        elif key == "cpu":
            if val not in CPUS:
                raise ConfigError(f"DYNAMICCL_TOPOLOGY: cpu={val!r}; accepted: {', '.join(CPUS)}")
            out[key] = val
        elif key in ("intra", "inter"):
            out[key] = _link(key, val, INTRA if key == "intra" else INTER)
        else:  # nvswitch, sharp
            if val not in ("0", "1"):
                raise ConfigError(f"DYNAMICCL_TOPOLOGY: {key}={val!r}; accepted: 0, 1")
            out[key] = val == "1"
    return out


def local_facts(device_index: int = None) -> Dict:
    """What this rank can see of its own place: its host and, with CUDA, its GPU. The host is
    NCCL_HOSTID where set: NCCL takes it as the host's identity (ranks of one machine with
    different ids are different hosts to it, joined by its network transport), and the model
    must see the cluster NCCL sees."""
    host = os.environ.get("NCCL_HOSTID") or socket.gethostname()
    facts = {"host": host, "gpu": None, "pcie": False}
    if torch.cuda.is_available():
        index = torch.cuda.current_device() if device_index is None else device_index
        facts["gpu"] = _gpu_class(torch.cuda.get_device_capability(index)[0])
        facts["pcie"] = "PCIe" in torch.cuda.get_device_name(index)
    return facts


def _combine():
    def combine(facts: List[Dict]) -> Dict:
        hosts: Dict[str, int] = {}
        for f in facts:
            hosts[f["host"]] = hosts.get(f["host"], 0) + 1
        gpus = [f["gpu"] for f in facts if f["gpu"]]
        # The oldest generation present, and PCIe if any rank sits on PCIe: a model that errs on
        # the slow side only orders probing more cautiously.
        gpu = min(gpus, key=GPUS.index) if gpus else "hopper"
        pcie = any(f["pcie"] for f in facts)
        return _C.described_topology(len(hosts), max(hosts.values()), gpu, pcie)
    return combine


def apply_override(spec: Dict, override: Dict) -> Dict:
    """`spec` with the user's keys. Link bandwidths the user does not give are the assumed ones
    for the final GPU generation and link type (the detected spec's are assumptions too)."""
    spec = dict(spec)
    for key, value in override.items():
        if key == "gpus":
            spec["gpus_per_node"] = value
        elif key not in ("intra", "inter"):
            spec[key] = value
    for key in ("intra", "inter"):
        link = {**spec[key], **override.get(key, {})}
        if "bw_GBps" not in override.get(key, {}):
            link["bw_GBps"] = _C.assumed_bw_GBps(link["type"], spec["gpu"])
        spec[key] = link
    if spec["intra"]["type"] == "pcie":
        spec["nvswitch"] = False
    return spec


def nccl_channel_bounds() -> Dict:
    """NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS as NCCL applies them to its channel count (the
    channel caps the catalog offers depend on it); 0 where unset. Checked equal on every rank at
    group creation (config._NCCL_CHOICES)."""
    out = {}
    for key, var in NCCL_CHANNEL_BOUNDS.items():
        value = os.environ.get(var, "").strip()
        if value and not (value.isdigit() and int(value) >= 1):
            raise ConfigError(f"{var}={value!r}: the NCCL prior follows NCCL's channel bounds; "
                              "accepted: an integer >= 1")
        out[key] = min(int(value), 64) if value else 0  # NCCL caps at its MAXCHANNELS
    return out


def describe(store, rank: int, size: int, override: Dict, facts: Dict = None) -> Dict:
    """The topology every rank of the group agrees on (a TopologySpec as a dict): the ranks'
    facts (``facts``, or what this rank sees: local_facts()), combined by rank 0, then `override`
    (the same on every rank: it is among the settings checked at group creation). Its nodes and
    GPUs per node apply only when they match the group's size; otherwise the group's own hosts
    give its shape."""
    detected = agree(store, rank, size, "topology", facts or local_facts(), _combine())
    spec = apply_override(detected, override)
    spec.update(nccl_channel_bounds())  # (a channel count the user gives wins over both)
    if spec["nodes"] * spec["gpus_per_node"] != size:
        spec["nodes"], spec["gpus_per_node"] = detected["nodes"], detected["gpus_per_node"]
    return spec
