"""DynamICCL: a PyTorch c10d backend that learns, per collective, the engine configuration.

    import dynamiccl_pg
    torch.distributed.init_process_group(backend="dynamiccl")

Importing registers "dynamiccl" for cpu and cuda devices.
"""

from . import _C  # noqa: F401  (the compiled core)
from . import fsdp, pipelining  # noqa: F401  (framework integration: annotate(...))
from .backend import register as _register
from .config import ConfigError, Options
from .ddp import register_ddp_hook
from .hints import hint
from .policy_io import load_policy, save_policy
from .policy_schema import PolicyError
from .telemetry import (decision_hash, decision_log, format_summary, report_loss, stats, step,
                        write_trace)

__all__ = [
    "ConfigError", "Options", "PolicyError", "decision_hash", "decision_log", "format_summary",
    "hint", "load_policy", "register_ddp_hook", "report_loss", "save_policy", "stats", "step",
    "write_trace",
]

_register()
