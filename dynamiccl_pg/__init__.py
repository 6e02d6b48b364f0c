"""DynamICCL: a PyTorch c10d backend that learns, per collective, the engine configuration.

    import dynamiccl_pg
    torch.distributed.init_process_group(backend="dynamiccl")

Importing registers "dynamiccl" for cpu and cuda devices.
"""

import torch as _torch

from . import torch_support as _torch_support

_torch_support.check(_torch.__version__)  # a torch outside the range: one error naming it
from . import _C  # the compiled core

if _torch_support.minor(_C.built_for_torch) != _torch_support.minor(_torch.__version__):
    raise _torch_support.UnsupportedTorchError(
        "dynamiccl: this build of dynamiccl_pg._C was compiled against torch "
        f"{_C.built_for_torch}, "
        f"but torch {_torch.__version__} is installed; rebuild it (pip install "
        "--no-build-isolation . or scripts/test.sh) in this environment")
from . import fsdp, pipelining  # noqa: F401  (framework integration: annotate(...))
from .backend import register as _register
from .config import ConfigError, Options
from .ddp import register_ddp_hook
from .hints import hint
from .policy_io import load_policy, save_policy
from .policy_schema import PolicyError
from .signals import report_loss, step
from .telemetry import decision_hash, decision_log, format_summary, stats, write_trace

__all__ = [
    "ConfigError", "Options", "PolicyError", "decision_hash", "decision_log", "format_summary",
    "hint", "load_policy", "register_ddp_hook", "report_loss", "save_policy", "stats", "step",
    "write_trace",
]

_register()
