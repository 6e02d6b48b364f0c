"""The engines under a dynamiccl group: the ones torch would have given the user.

cpu -> torch's ``gloo``; cuda -> whatever ``nccl`` means in the installed torch and environment:
``ProcessGroupNCCL2`` (nccl2) on torch 2.15 unless ``TORCH_DIST_USE_NCCL2=0``, the legacy
``ProcessGroupNCCL`` on torch 2.11-2.14 and under that variable. Each is created as torch itself
creates it: through the creator torch registered for the name (with the user's
``ProcessGroupNCCL.Options`` passed through), or, where torch has none registered (2.11-2.14 build
gloo and nccl in ``_new_process_group_helper``), the same class with the same arguments.

``DYNAMICCL_INNER=cuda:nccl-legacy`` (``device:name`` pairs, comma-separated) names another engine
torch has registered for the device.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.distributed as dist

from .errors import ConfigError

VARIABLE = "DYNAMICCL_INNER"


def _registry() -> dict:
    return getattr(dist.Backend, "_plugins", {})


def _ensure_registered(name: str) -> None:
    # torch 2.15 registers its own backends lazily, through entry points.
    ensure = getattr(dist.Backend, "_ensure_backend_registered", None)
    if ensure is not None:
        ensure(name)


def registered(device: str) -> list:
    """The engine names torch has registered (or builds in) for `device` (an error's list)."""
    from importlib.metadata import entry_points
    for entry in entry_points(group="torch.distributed.backends"):  # registered on first use
        try:
            _ensure_registered(entry.name)
        except Exception:  # noqa: BLE001 - an entry point that does not load offers nothing
            continue
    names = {n for n, devices in dist.Backend.backend_capability.items() if device in devices}
    names.discard("dynamiccl")
    return sorted(names)


def _check_name(device: str, name: str) -> None:
    try:
        _ensure_registered(name)
    except RuntimeError:
        pass  # named below with what torch has
    if device not in dist.Backend.backend_capability.get(name, ()):
        raise ConfigError(f"{VARIABLE}: torch has no engine {name!r} for {device} tensors; "
                          f"registered for {device}: {', '.join(registered(device))}")


def check(inner: dict) -> None:
    """Every engine DYNAMICCL_INNER names is one torch has for its device (CUDA's too where no
    GPU is here: the same settings must work on the machines that have one)."""
    for device, name in inner.items():
        _check_name(device, name)


def describe(engine) -> str:
    """An engine as stats() and the summary name it: torch's name and its class."""
    return f"{engine.name()} ({type(engine).__name__})" if engine is not None else ""


def _backend_options(store, rank: int, size: int, timeout, dist_opts, split_from):
    opts = dist.distributed_c10d._DistributedBackendOptions()
    opts.store, opts.group_rank, opts.group_size = store, rank, size
    opts.timeout = timeout
    opts.group_id = dist_opts.group_id
    opts.global_ranks_in_group = list(dist_opts.global_ranks_in_group)
    # Fields of newer torch only.
    for field, value in (("process_group", getattr(dist_opts, "process_group", None)),
                         ("split_from", split_from),
                         ("enable_reconfigure", getattr(dist_opts, "enable_reconfigure", False))):
        if hasattr(opts, field):
            setattr(opts, field, value)
    return opts


def creator(name: str):
    """The creator torch registered for engine `name` (its ``_BackendPlugin``: creator_fn,
    extended_api), or None where torch builds the engine itself (gloo and nccl on 2.11-2.14)."""
    _ensure_registered(name)
    return _registry().get(name.upper())


def create(device: str, name: str, store, rank: int, size: int, timeout, dist_opts,
           backend_options=None, split_from=None):
    """The engine `name` for `device` tensors of a group, made as torch makes it, on its own store
    prefix (as torch gives each device of a multi-device group)."""
    _check_name(device, name)
    store = dist.PrefixStore(f"{device}/", store)
    plugin = creator(name)
    if plugin is not None:
        if not plugin.extended_api:
            return plugin.creator_fn(store, rank, size, timeout)
        opts = _backend_options(store, rank, size, timeout, dist_opts, split_from)
        return plugin.creator_fn(opts, backend_options)
    # torch 2.11-2.14 build gloo and nccl in _new_process_group_helper: the same class, the same
    # arguments.
    if name == "gloo":
        return dist.ProcessGroupGloo(store, rank, size, timeout)
    if name == "nccl":
        return _legacy_nccl(store, rank, size, timeout, dist_opts, backend_options, split_from)
    raise ConfigError(f"{VARIABLE}: torch {torch.__version__} cannot create {name!r} here")


def _legacy_nccl(store, rank, size, timeout, dist_opts, nccl_options, split_from):
    opts = nccl_options if nccl_options is not None else dist.ProcessGroupNCCL.Options()
    if nccl_options is None:
        opts.is_high_priority_stream = False
    opts._timeout = timeout
    global_ranks = list(dist_opts.global_ranks_in_group)
    if isinstance(split_from, dist.ProcessGroupNCCL):
        opts.split_from = split_from
        opts.split_color = dist.distributed_c10d._process_group_color(global_ranks)
    opts.global_ranks_in_group = global_ranks
    opts.group_name = dist_opts.group_id
    return dist.ProcessGroupNCCL(store, rank, size, opts)


def self_recording(name: str) -> bool:
    """Whether torch counts engine `name` among those that record their calls in its flight
    recorder themselves (the legacy NCCL and Gloo do, nccl2 does not: torch's hook records for
    it)."""
    registry = getattr(dist.distributed_c10d, "_FR_SELF_RECORDING_BACKENDS", None)
    return registry is None or name in registry


def nccl_version_code(emulated_release: Optional[str]) -> int:
    """NCCL_VERSION_CODE (major*10000 + minor*100 + patch) of the NCCL engine: the emulated
    release ("2.30" -> 23000), else the NCCL torch loaded; 0 when unknown."""
    if emulated_release is not None:
        major, minor = emulated_release.split(".")[:2]
        return int(major) * 10000 + int(minor) * 100
    version = torch.cuda.nccl.version()
    if isinstance(version, int):  # old torch: NCCL's own code
        return version
    major, minor, patch = (tuple(version) + (0, 0, 0))[:3]
    return int(major) * 10000 + int(minor) * 100 + int(patch)
