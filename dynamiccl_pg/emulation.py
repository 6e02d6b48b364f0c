"""The emulated NCCL (``DYNAMICCL_EMULATE_NCCL=<scenario.json>``): the backend's NCCL branch run end
to end without a GPU. CPU tensors take the NCCL path; the engine under it (``_C.EmulatedNccl``)
loads our tuner plugin from ``NCCL_TUNER_PLUGIN`` as NCCL 2.28, 2.30 or 2.32 does
(``DYNAMICCL_EMULATE_NCCL_VERSION``), asks it for every collective with a cost table from NCCL's
cost model of the scenario's cluster (on the calling thread, or on a thread of its own with
``DYNAMICCL_EMULATE_NCCL_NONBLOCKING=1``, as for NCCL's non-blocking communicators), runs the data
through Gloo and reports the scenario's truth for what it chose as the GPU time.

Ranks sit on the scenario's cluster in order: global rank r on node r // gpus_per_node, so the
world must have nodes x gpus_per_node ranks. What each rank "sees" of its place (its host, its
GPU generation, NVLink or PCIe) comes from the scenario, and goes through the same agreement as
real facts do (topology.describe).
"""

from __future__ import annotations

import functools
import hashlib
import os
from datetime import timedelta
from typing import Dict, List

import torch.distributed as dist

from . import _C
from .errors import ConfigError
from .sim.scenario import Scenario, load_scenario


@functools.lru_cache(maxsize=None)
def scenario(path: str) -> Scenario:
    return load_scenario(path)


def _place(sc: Scenario) -> tuple:
    t = sc.data["topology"]
    return t["nodes"], t["gpus_per_node"]


def check_world(sc: Scenario, world_size: int) -> None:
    nodes, gpus = _place(sc)
    if nodes * gpus != world_size:
        raise ConfigError(f"DYNAMICCL_EMULATE_NCCL={sc.source!r}: its cluster has {nodes} x {gpus} "
                          f"= {nodes * gpus} GPUs, the world has {world_size} ranks; accepted: a "
                          "scenario with one GPU per rank")


def facts(sc: Scenario, global_rank: int) -> Dict:
    """What this rank would see of its place on the emulated cluster (topology.local_facts)."""
    t = sc.data["topology"]
    return {"host": f"emulated-node{global_rank // t['gpus_per_node']}",
            "gpu": t.get("gpu", "hopper"), "pcie": t["intra"]["type"] == "pcie"}


def group_shape(sc: Scenario, global_ranks: List[int]) -> tuple:
    """(nodes, GPUs per node) of a communicator over `global_ranks` on the emulated cluster."""
    gpus = _place(sc)[1]
    per_node: Dict[int, int] = {}
    for r in global_ranks:
        per_node[r // gpus] = per_node.get(r // gpus, 0) + 1
    return len(per_node), max(per_node.values())


def make_engine(store, rank: int, size: int, global_ranks: List[int], timeout: timedelta,
                cfg: dict, dist_opts):
    """The emulated NCCL of one group: its own Gloo for the data, on its own store prefix, made as
    torch makes Gloo (in the reconfigure regime where the group is)."""
    from . import engines
    sc = scenario(cfg["emulate_nccl"])
    gloo = engines.create("cpu", "gloo", dist.PrefixStore("emulated_nccl/", store), rank, size,
                          timeout, dist_opts)
    group_id = dist_opts.group_id
    nodes, gpus = group_shape(sc, global_ranks)
    fault = cfg["emulate_nccl_fault"]
    return _C.EmulatedNccl(
        rank, size, gloo, sc.to_spec(), nodes, gpus,
        # NCCL's commHash: the same on every rank of the communicator.
        int(hashlib.sha256(f"{group_id}".encode()).hexdigest()[:15], 16),
        os.environ.get("NCCL_TUNER_PLUGIN", ""), os.environ.get("NCCL_ALGO", ""),
        os.environ.get("NCCL_PROTO", ""), fault.get("skip_plugin", False),
        fault.get("unavailable", []), cfg["emulate_nccl_version"],
        cfg["emulate_nccl_nonblocking"])
