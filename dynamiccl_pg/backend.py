"""Registration of the "dynamiccl" c10d backend and its creator.

The creator builds the engines torch would have given the user (engines.py: Gloo for CPU tensors
and, when CUDA is available, whatever ``nccl`` means in this torch, with the user's
``ProcessGroupNCCL.Options``), opens the group's decision channel in our tuner plugin before the
NCCL engine can create its communicator, and wraps them in the C++ ``ProcessGroupDynamicCCL``.
A group opens no connections beyond its engines': our CPU schedules and the consensus rounds
travel on the Gloo engine's point-to-point operations.
"""

from __future__ import annotations

import functools
import os
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist

from . import _C, agreement, config, engines, groups, topology
from .groups import backend_of, backends, process_rank  # noqa: F401  (the package's API)

BACKEND_NAME = "dynamiccl"

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
    return True


class _ChildOptions:
    """What the creator reads of torch's _DistributedBackendOptions, for a group split() or
    merge() makes."""

    def __init__(self, store, rank, size, timeout, global_ranks, group_id):
        self.store, self.group_rank, self.group_size = store, rank, size
        self.timeout, self.global_ranks_in_group, self.group_id = timeout, global_ranks, group_id
        self.split_from = None


def _split(backend_options, parent_global_ranks, store, ranks, parent_rank, timeout, name, desc):
    """split()'s creator: the child of ``ranks`` (the parent's numbering) is made as every group
    is, with the parent's options; its role comes from its description, as for any group."""
    opts = _ChildOptions(store, ranks.index(parent_rank), len(ranks), timeout,
                         [parent_global_ranks[r] for r in ranks], name)
    return _create(opts, backend_options)


def _merge(backend_options, store, gloo, cuda, rank, size, timeout, name, desc):
    """merge()'s creator: a group over the engines the merge made, with the parent's options and
    its own settings agreement among the merged ranks."""
    opts = _ChildOptions(store, rank, size, timeout, [], name)
    return _create(opts, backend_options, merged=(gloo, cuda))


def _new_membership(store, cfg, uuid, rank, size):
    """After a reconfigure: the members of the new membership (a rank that joined among them)
    agree on the settings that shape decisions before they learn again."""
    agreement.agree(store, rank, size, f"settings/reconfigure/{uuid}", config.fingerprint(cfg),
                    agreement.identical("settings that shape decisions"))


def _cuda_engine(cfg, dist_opts, store, rank, size, timeout, global_ranks, nccl_options, merged):
    """The group's CUDA engine (torch's `nccl`, the one DYNAMICCL_INNER names, or the emulated
    NCCL) and its decision channel (0: not tuned), opened before the engine can create its
    communicator. Completes ``cfg`` with what the NCCL arms need (tuning, release, topology)."""
    cfg["nccl_tuning"] = cfg["mode"] != "off" and _prepare_nccl_env(cfg)
    channel = 0
    if cfg["nccl_tuning"]:
        channel = _C.nccl_channel_open()
        if not channel:
            _warn_once("nccl_channels", "dynamiccl: the process has 4095 groups with NCCL tuning "
                       "open; new groups run NCCL untuned")
            cfg["nccl_tuning"] = False
    emulated = cfg["emulate_nccl"]
    try:
        # The engine may create the group's communicator right away (a bound device, a split
        # from the parent's): its tuner binds to the group's channel.
        _C.nccl_expect_comm(channel, size)
        if merged:
            nccl = merged[1]
        elif emulated:
            from . import emulation
            if not dist_opts.global_ranks_in_group:  # the world
                emulation.check_world(emulation.scenario(emulated), size)
            nccl = emulation.make_engine(store, rank, size, global_ranks, timeout, cfg, dist_opts)
        else:
            parent = getattr(getattr(dist_opts, "split_from", None), "nccl_engine", None)
            nccl = engines.create("cuda", cfg["inner"]["cuda"], store, rank, size, timeout,
                                  dist_opts, nccl_options, split_from=parent)
    except BaseException:
        _C.nccl_channel_close(channel)
        raise
    finally:
        _C.nccl_expect_comm(channel, -1)
    facts = None
    if emulated:
        from . import emulation
        facts = emulation.facts(emulation.scenario(emulated), global_ranks[rank])
    cfg["nccl_emulated"] = bool(emulated)
    # Which NCCL the catalog is for (chunk-size arms need 2.30): the emulated release, or torch's.
    cfg["nccl_version"] = engines.nccl_version_code(cfg["emulate_nccl_version"] if emulated
                                                    else None)
    # The cluster NCCL's cost model (the NCCL arms' prior) assumes, as every rank describes it.
    cfg["nccl_topology"] = topology.describe(store, rank, size, cfg["topology_override"], facts)
    return nccl, channel


def _create(dist_opts, backend_options, merged=None):
    """Extended-API creator: ``(DistributedBackendOptions, pg_options)``. ``merged``: the engines
    a merge() made (Gloo's, and the CUDA engine's or None), which the group wraps instead of
    making its own."""
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
    engines.check(cfg["inner"])
    store, rank, size = dist_opts.store, dist_opts.group_rank, dist_opts.group_size
    timeout = dist_opts.timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout.total_seconds()))

    # Nothing runs before every rank is known to decide the same way.
    agreement.agree(store, rank, size, "settings", config.fingerprint(cfg),
                    agreement.identical("settings that shape decisions"))
    # init_process_group(enable_reconfigure=True): the engines connect at the first reconfigure.
    cfg["connect_at_reconfigure"] = bool(getattr(dist_opts, "enable_reconfigure", False))
    gloo = (merged[0] if merged else
            engines.create("cpu", cfg["inner"]["cpu"], store, rank, size, timeout, dist_opts))
    nccl, channel = None, 0
    global_ranks = list(dist_opts.global_ranks_in_group) or list(range(size))
    emulated = cfg["emulate_nccl"]
    with_cuda = emulated or (torch.cuda.is_available() and dist.is_nccl_available())
    if merged and merged[1] is None:
        with_cuda = False  # the merged group has no CUDA engine
    if with_cuda:
        nccl, channel = _cuda_engine(cfg, dist_opts, store, rank, size, timeout, global_ranks,
                                     nccl_options, merged)
    pg = _C.ProcessGroupDynamicCCL(rank, size, gloo, nccl, cfg, timeout, channel)
    pg.set_factories(split=functools.partial(_split, backend_options, global_ranks),
                     merge=functools.partial(_merge, backend_options),
                     membership=functools.partial(_new_membership, store, cfg))
    # Eager init: a rank outside a new group still joins the parent communicator's split.
    pg.perform_nocolor_split = getattr(nccl, "perform_nocolor_split", lambda device: None)
    pg.nccl_engine = nccl  # (the emulated NCCL's record of what it ran: tests, demos)
    # Which engines run the group's calls, as stats() and the summary name them.
    pg.inner_engines = {"cpu": engines.describe(gloo), "cuda": engines.describe(nccl)}
    pg.nccl_emulated = emulated or None
    pg.group_name_at_creation = dist_opts.group_id  # "0", "1", ...: stable across runs
    pg.nccl_topology = cfg.get("nccl_topology")  # what the NCCL prior assumes (None: no NCCL)
    # This process's global rank, still known once the default group is gone (exit-time trace).
    # (The default group is created without its global ranks: there they are the group's.)
    pg.global_rank = global_ranks[rank]
    policy_path = os.environ.get("DYNAMICCL_POLICY")
    if policy_path and cfg["mode"] != "off":
        from . import policy_io
        policy_io.load_into(pg, policy_path)
    _declare_flight_recording(engines.self_recording(cfg["inner"]["cpu"]) and
                              (nccl is None or (not emulated and
                                                engines.self_recording(cfg["inner"]["cuda"]))))
    groups.add(pg)
    return pg


def _declare_flight_recording(self_recording: bool) -> None:
    """Tells torch whether this group's engines record its calls in the flight recorder
    themselves (Gloo and the legacy ProcessGroupNCCL do; nccl2 and the emulated NCCL do not).
    torch (2.15) reads this right after the creator returns and attaches its recording hook only
    where they do not: a hook over engines that record would record every call twice, at about
    13 us of CPU per call (benchmarks/results/learning_cost.md). Torch without the registry has
    no hook."""
    registry = getattr(dist.distributed_c10d, "_FR_SELF_RECORDING_BACKENDS", None)
    if registry is not None:
        (registry.add if self_recording else registry.discard)(BACKEND_NAME)


def register() -> None:
    """Registers "dynamiccl" for cpu and cuda (idempotent). Also the entry point's registrar."""
    if getattr(dist.Backend, "DYNAMICCL", None) == BACKEND_NAME and \
            BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    config.validate_environment()
    dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True,
                                  devices=["cpu", "cuda"])
