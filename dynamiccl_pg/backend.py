"""Registration of the "dynamiccl" c10d backend and its creator.

The creator builds the real engines — a ProcessGroupGloo for CPU data, a second one for the
control plane and our CPU schedules, and (when CUDA is available) a ProcessGroupNCCL with blocking
communicators whose tuner is our plugin — each on its own store prefix, and wraps them in the C++
``ProcessGroupDynamicCCL``.
"""

from __future__ import annotations

import functools
import os
import warnings
from datetime import timedelta
from typing import Optional

import torch
import torch.distributed as dist

from . import _C, agreement, config, topology

BACKEND_NAME = "dynamiccl"

# The live backends of this process, for stats()/save_policy() without a group argument and for
# the exit-time summary/trace. A destroyed group's backend (shut down by destroy_process_group) is
# dropped at the next look (a group's creation, backends()) so that it is freed; on_destroyed
# hooks (telemetry's) first keep what the exit-time outputs need of it.
_created: list = []
on_destroyed: list = []  # callables(pg), each run once per destroyed backend
_process_rank = None  # this process's global rank, still known once every group is gone
_warned = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, stacklevel=3)


def _prepare_nccl_env(cfg: dict) -> bool:
    """Points NCCL at our tuner plugin before its first communicator. Returns whether NCCL's
    choices are ours to make; steps aside (one warning) when the user configured NCCL otherwise."""
    if not cfg["nccl_plugin"]:
        return False
    user_choice = [v for v in ("NCCL_ALGO", "NCCL_PROTO") if os.environ.get(v)]
    if user_choice:
        _warn_once("nccl_user", f"dynamiccl: {', '.join(user_choice)} is set; NCCL tuning steps "
                   "aside and NCCL decides as configured")
        return False
    plugin = _C.nccl_plugin_path()
    current = os.environ.get("NCCL_TUNER_PLUGIN")
    if current and os.path.realpath(current) != os.path.realpath(plugin):
        _warn_once("nccl_plugin", f"dynamiccl: NCCL_TUNER_PLUGIN={current} is set by the user; "
                   "NCCL tuning steps aside")
        return False
    os.environ["NCCL_TUNER_PLUGIN"] = plugin
    # Per-collective GPU time from the inner work's events (read without blocking).
    os.environ.setdefault("TORCH_NCCL_ENABLE_TIMING", "1")
    return True


def _nccl_version_code(emulated_release: Optional[str]) -> int:
    """NCCL_VERSION_CODE (major*10000 + minor*100 + patch) of the NCCL engine: the emulated
    release ("2.30" -> 23000), else torch's NCCL; 0 when unknown."""
    if emulated_release is not None:
        major, minor = emulated_release.split(".")[:2]
        return int(major) * 10000 + int(minor) * 100
    version = torch.cuda.nccl.version()
    if isinstance(version, int):  # old torch: NCCL's own code
        return version
    major, minor, patch = (tuple(version) + (0, 0, 0))[:3]
    return int(major) * 10000 + int(minor) * 100 + int(patch)


def _make_nccl(store, rank: int, size: int, timeout: timedelta, nccl_options, split_from,
               global_ranks):
    opts = nccl_options if nccl_options is not None else dist.ProcessGroupNCCL.Options()
    opts._timeout = timeout
    # The decision channel is per calling thread: communicators must be blocking so NCCL calls
    # the tuner on the thread that issued the collective.
    opts.config.blocking = 1
    # Eager init (a default group bound to a device): torch splits the parent's communicator for
    # a new group, and so does our inner NCCL, from the parent's inner NCCL, with torch's color.
    parent_nccl = getattr(split_from, "nccl_engine", None)
    if isinstance(parent_nccl, dist.ProcessGroupNCCL):
        opts.split_from = parent_nccl
        opts.split_color = dist.distributed_c10d._process_group_color(global_ranks)
        opts.global_ranks_in_group = global_ranks
    return dist.ProcessGroupNCCL(dist.PrefixStore("nccl/", store), rank, size, opts)


class _SplitOptions:
    """What the creator reads of torch's _DistributedBackendOptions, for a child of split()."""

    def __init__(self, store, rank, size, timeout, global_ranks, group_id):
        self.store, self.group_rank, self.group_size = store, rank, size
        self.timeout, self.global_ranks_in_group, self.group_id = timeout, global_ranks, group_id
        self.split_from = None


def _split(backend_options, parent_global_ranks, store, ranks, parent_rank, timeout, name, desc):
    """split()'s creator: the child of ``ranks`` (the parent's numbering) is made as every group
    is, with the parent's options; its role comes from its description, as for any group."""
    opts = _SplitOptions(store, ranks.index(parent_rank), len(ranks), timeout,
                         [parent_global_ranks[r] for r in ranks], name)
    return _create(opts, backend_options)


def _control_plane(store, rank: int, size: int, gloo):
    """The control plane's ProcessGroupGloo, on the Gloo engine's devices (the interfaces torch
    chose for it, GLOO_SOCKET_IFNAME included): a device is an event-loop thread, and a second
    one, woken by every consensus round, made a round cost a job of tiny calls 3-8 times the wall
    clock on a machine whose ranks share cores (benchmarks/results/learning_cost.md)."""
    opts = dist.ProcessGroupGloo._Options()
    opts._devices = gloo.options._devices
    opts._timeout = gloo.options._timeout
    return dist.ProcessGroupGloo(store, rank, size, opts)


def _create(dist_opts, backend_options):
    """Extended-API creator: ``(DistributedBackendOptions, pg_options)``."""
    options = None
    nccl_options = None
    if isinstance(backend_options, config.Options):
        options = backend_options
        nccl_options = backend_options.nccl_options
    elif dist.is_nccl_available() and isinstance(backend_options, dist.ProcessGroupNCCL.Options):
        nccl_options = backend_options  # e.g. Megatron's communicator config
    elif backend_options is not None:
        _warn_once(f"opts:{type(backend_options).__name__}",
                   f"dynamiccl: ignoring pg_options of type {type(backend_options).__name__}; "
                   "accepted: dynamiccl_pg.Options, ProcessGroupNCCL.Options")
    cfg = config.resolve(options)
    store, rank, size = dist_opts.store, dist_opts.group_rank, dist_opts.group_size
    timeout = dist_opts.timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout.total_seconds()))

    # Nothing runs before every rank is known to decide the same way.
    agreement.agree(store, rank, size, "settings", config.fingerprint(cfg),
                    agreement.identical("settings that shape decisions"))
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo/", store), rank, size, timeout)
    control = _control_plane(dist.PrefixStore("control/", store), rank, size, gloo)
    nccl = None
    global_ranks = list(dist_opts.global_ranks_in_group) or list(range(size))
    emulated = cfg["emulate_nccl"]
    if emulated or (torch.cuda.is_available() and dist.is_nccl_available()):
        cfg["nccl_tuning"] = cfg["mode"] != "off" and _prepare_nccl_env(cfg)
        facts = None
        if emulated:
            from . import emulation
            sc = emulation.scenario(emulated)
            if not dist_opts.global_ranks_in_group:  # the world
                emulation.check_world(sc, size)
            facts = emulation.facts(sc, global_ranks[rank])
            nccl = emulation.make_engine(store, rank, size, global_ranks, timeout, cfg,
                                         dist_opts.group_id)
            cfg["nccl_emulated"] = True
        else:
            nccl = _make_nccl(store, rank, size, timeout, nccl_options,
                              getattr(dist_opts, "split_from", None), global_ranks)
        # Which NCCL the catalog is for (chunk-size arms need 2.30): the emulated release, or
        # torch's NCCL.
        cfg["nccl_version"] = _nccl_version_code(cfg["emulate_nccl_version"] if emulated else None)
        # The cluster NCCL's cost model (the NCCL arms' prior) assumes, as every rank describes it.
        cfg["nccl_topology"] = topology.describe(store, rank, size, cfg["topology_override"],
                                                 facts)
    pg = _C.ProcessGroupDynamicCCL(rank, size, gloo, control, nccl, cfg, timeout)
    pg.set_split_factory(functools.partial(_split, backend_options, global_ranks))
    # Eager init: a rank outside a new group still joins the parent communicator's split.
    pg.perform_nocolor_split = getattr(nccl, "perform_nocolor_split", lambda device: None)
    pg.nccl_engine = nccl  # (the emulated NCCL's record of what it ran: tests, demos)
    pg.nccl_emulated = emulated or None
    pg.group_name_at_creation = dist_opts.group_id  # "0", "1", ...: stable across runs
    pg.nccl_topology = cfg.get("nccl_topology")  # what the NCCL prior assumes (None: no NCCL)
    # This process's global rank, still known once the default group is gone (exit-time trace).
    # (The default group is created without its global ranks: there they are the group's.)
    pg.global_rank = global_ranks[rank]
    global _process_rank
    _process_rank = pg.global_rank
    policy_path = os.environ.get("DYNAMICCL_POLICY")
    if policy_path and cfg["mode"] != "off":
        from . import policy_io
        policy_io.load_into(pg, policy_path)
    _declare_flight_recording(native=not emulated)
    _drop_destroyed()
    _created.append(pg)
    return pg


def _declare_flight_recording(native: bool) -> None:
    """Tells torch whether this group's engines record its calls in the flight recorder
    themselves (Gloo and ProcessGroupNCCL do; the emulated NCCL does not). torch (2.15) reads
    this right after the creator returns and attaches its recording hook only where they do
    not: a hook over engines that record would record every call twice, at about 13 us of CPU
    per call (benchmarks/results/learning_cost.md). Torch without the registry has no hook."""
    registry = getattr(dist.distributed_c10d, "_FR_SELF_RECORDING_BACKENDS", None)
    if registry is not None:
        (registry.add if native else registry.discard)(BACKEND_NAME)


def register() -> None:
    """Registers "dynamiccl" for cpu and cuda (idempotent). Also the entry point's registrar."""
    if getattr(dist.Backend, "DYNAMICCL", None) == BACKEND_NAME and \
            BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    config.validate_environment()
    dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True,
                                  devices=["cpu", "cuda"])


def _drop_destroyed() -> None:
    live = []
    for pg in _created:
        if pg.shut_down:
            for hook in on_destroyed:
                hook(pg)
        else:
            live.append(pg)
    _created[:] = live


def backends():
    """The live dynamiccl backends of this process, oldest first."""
    _drop_destroyed()
    return list(_created)


def process_rank() -> int:
    """This process's global rank (0 before any dynamiccl group was created)."""
    if dist.is_initialized():
        return dist.get_rank()
    return _process_rank if _process_rank is not None else 0


def backend_of(group=None):
    """The ProcessGroupDynamicCCL behind ``group`` (default: the world)."""
    pg = group if group is not None else dist.group.WORLD
    if pg is None:
        raise RuntimeError("dynamiccl: no process group; call init_process_group first")
    if isinstance(pg, _C.ProcessGroupDynamicCCL):
        return pg
    b = pg._get_backend(torch.device("cpu"))
    if not isinstance(b, _C.ProcessGroupDynamicCCL):
        raise ValueError(f"dynamiccl: group {pg.group_name!r} does not use the dynamiccl backend "
                         f"(its CPU backend is {type(b).__name__})")
    if b.shut_down:
        raise ValueError(f"dynamiccl: group {pg.group_name!r} was destroyed; its policy and "
                         "statistics went with it")
    return b
