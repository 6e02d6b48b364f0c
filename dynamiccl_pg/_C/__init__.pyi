"""
DynamICCL core: the c10d backend, the learner and the simulator
"""
from __future__ import annotations
import collections.abc
import datetime
import torch._C._distributed_c10d
import typing
from . import sim
__all__: list[str] = ['EMULATED_NCCL_DEFAULT_RELEASE', 'EMULATED_NCCL_RELEASES', 'EmulatedNccl', 'Engine', 'PriorModel', 'ProcessGroupDynamicCCL', 'arm_names', 'assumed_bw_GBps', 'backend_defaults', 'backend_surface', 'built_for_torch', 'default_heads', 'described_topology', 'get_hint', 'head_settings', 'is_nccl_arm_name', 'learner_rules', 'nccl_arm_uncapped', 'nccl_channel_close', 'nccl_channel_open', 'nccl_comms_bound', 'nccl_counters', 'nccl_expect_comm', 'nccl_plugin_path', 'nccl_predict', 'nccl_profiler_records', 'policy_keys', 'prior_features', 'prior_schema', 'register_ddp_comm_hook', 'set_hint', 'sim', 'size_bin', 'vocabulary']
class EmulatedNccl(torch._C._distributed_c10d.Backend):
    def __init__(self, rank: typing.SupportsInt | typing.SupportsIndex, size: typing.SupportsInt | typing.SupportsIndex, gloo: typing.Any, scenario: sim.ScenarioSpec, nodes: typing.SupportsInt | typing.SupportsIndex, gpus_per_node: typing.SupportsInt | typing.SupportsIndex, comm_id: typing.SupportsInt | typing.SupportsIndex, tuner_plugin: str, nccl_algo: str, nccl_proto: str, skip_plugin: bool, unavailable: collections.abc.Sequence[str], release: str = '2.28', nonblocking: bool = False) -> None:
        ...
    def runs(self) -> list:
        """
        What it ran, oldest first: per call the op, whether NCCL's tuner saw it, bytes, algorithm, protocol, channel cap (-1: all), chunk size and the modelled duration.
        """
    @property
    def plugin_loaded(self) -> bool:
        """
        whether its communicator exists and loaded the tuner plugin
        """
    @property
    def tuner_abi(self) -> int:
        """
        the tuner ABI its communicator loaded (0: none yet)
        """
class Engine:
    """
    The engines a group runs calls on.
    
    Members:
    
      cpu
    
      nccl
    """
    __members__: typing.ClassVar[dict[str, Engine]]  # value = {'cpu': <Engine.cpu: 0>, 'nccl': <Engine.nccl: 1>}
    cpu: typing.ClassVar[Engine]  # value = <Engine.cpu: 0>
    nccl: typing.ClassVar[Engine]  # value = <Engine.nccl: 1>
    @typing.overload
    def __eq__(self, other: Engine) -> bool:
        ...
    @typing.overload
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def __int__(self) -> int:
        ...
    @typing.overload
    def __ne__(self, other: Engine) -> bool:
        ...
    @typing.overload
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class PriorModel:
    """
    A learned prior loaded and checked by the C++ loader the backend uses.
    """
    def __init__(self, path: str) -> None:
        ...
    def predict(self, rows: collections.abc.Sequence[collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex]], roles: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> list[tuple[float, float]]:
        """
        (log ratio, log sigma) per row, as the backend computes them (float64, rounded).
        """
    @property
    def metadata(self) -> dict:
        ...
    @property
    def path(self) -> str:
        ...
class ProcessGroupDynamicCCL(torch._C._distributed_c10d.Backend):
    def __init__(self, rank: typing.SupportsInt | typing.SupportsIndex, size: typing.SupportsInt | typing.SupportsIndex, gloo: typing.Any, nccl: typing.Any, config: dict, timeout: datetime.timedelta, nccl_channel: typing.SupportsInt | typing.SupportsIndex = 0) -> None:
        ...
    def add_loss(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    def arms(self, arg0: Engine, arg1: str) -> list[str]:
        ...
    def call_summary(self) -> list:
        ...
    def decision_hash(self) -> int:
        ...
    def decision_log(self) -> list:
        ...
    def decisions_logged(self) -> int:
        ...
    def end_step(self) -> None:
        ...
    def epoch(self, arg0: Engine) -> int:
        ...
    def has_engine(self, arg0: Engine) -> bool:
        ...
    def restore(self, arg0: Engine, arg1: dict) -> None:
        ...
    def round_cost_us(self, engine: Engine) -> float:
        """
        what the last consensus round cost, as the engine's learner prices it (us; 0: none yet)
        """
    def set_factories(self, split: typing.Any, merge: typing.Any, membership: typing.Any) -> None:
        """
        The creator's part: split(store, ranks, parent_rank, timeout, name, desc) -> child; merge(store, gloo, cuda, rank, size, timeout, name, desc) -> group; membership(uuid, rank, size) after a reconfigure (agrees on the settings).
        """
    def snapshot(self, arg0: Engine) -> typing.Any:
        ...
    def stats(self, arg0: Engine) -> typing.Any:
        ...
    def trace_records(self) -> list:
        ...
    @property
    def group_desc(self) -> str:
        ...
    @property
    def group_role(self) -> str:
        ...
    @property
    def learned_calls(self) -> int:
        ...
    @property
    def mode(self) -> str:
        ...
    @property
    def nccl_tuning_active(self) -> bool:
        ...
    @property
    def nodes(self) -> int:
        """
        nodes the group spans (as described)
        """
    @property
    def prior_path(self) -> str:
        """
        the learned prior's file; empty: the analytic prior
        """
    @property
    def rounds_applied(self) -> int:
        ...
    @property
    def rules_off(self) -> list[str]:
        ...
    @property
    def shut_down(self) -> bool:
        """
        True once the group was destroyed (shutdown()).
        """
    @property
    def steps(self) -> int:
        ...
def arm_names(engine: Engine, op: str, topology: typing.Any = None, nccl_version: typing.SupportsInt | typing.SupportsIndex = 0) -> list[str]:
    """
    The arms an engine offers for an op (the first is the engine default); NCCL's depend on the topology (a dict as dynamiccl_pg.topology describes it; default: one node of eight Hopper GPUs on NVLink); chunk-size arms need nccl_version (NCCL_VERSION_CODE) >= 23000.
    """
def assumed_bw_GBps(link: str, gpu: str) -> float:
    """
    Per-GPU bandwidth (GB/s) assumed for a link of this type on this GPU generation.
    """
def backend_defaults() -> dict:
    """
    The backend configuration's defaults (csrc/backend/config.h and the learner's), by the keys of the config dict ProcessGroupDynamicCCL takes.
    """
def backend_surface() -> list:
    """
    How the backend answers every virtual of c10d::Backend: (method, answer, how), answer one of ours, forwarded, inherited, not offered (csrc/backend/surface.h).
    """
def default_heads() -> dict:
    """
    Every role head's default settings.
    """
def described_topology(nodes: typing.SupportsInt | typing.SupportsIndex, gpus_per_node: typing.SupportsInt | typing.SupportsIndex, gpu: str, pcie: bool) -> dict:
    """
    The topology a group describes from what its ranks see, links at their assumed bandwidths.
    """
def get_hint() -> tuple[int, int, int, int, int, int]:
    ...
def head_settings() -> list:
    """
    The learner's per-head settings: name, range and meaning (DYNAMICCL_HEADS keys).
    """
def is_nccl_arm_name(name: str) -> bool:
    """
    Whether `name` has the form of an NCCL arm (ALGO/PROTO, optionally /cN and /kNK); whether a group offers it depends on the group's topology (arm_names).
    """
def learner_rules() -> list[tuple[str, str]]:
    """
    The learner's named rules, (name, description) in declaration order: what the simulator's --ablate switches off.
    """
def nccl_arm_uncapped(name: str) -> str:
    """
    The NCCL arm `name` without its channel cap (the arm a cap at or above its channels runs).
    """
def nccl_channel_close(channel: typing.SupportsInt | typing.SupportsIndex) -> None:
    ...
def nccl_channel_open() -> int:
    """
    A new decision channel's id (0: none left, the group is not tuned).
    """
def nccl_comms_bound(channel: typing.SupportsInt | typing.SupportsIndex) -> int:
    ...
def nccl_counters() -> dict:
    ...
def nccl_expect_comm(channel: typing.SupportsInt | typing.SupportsIndex, n_ranks: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    Communicators of n_ranks ranks NCCL creates from now on bind to the channel; -1: no more.
    """
def nccl_plugin_path() -> str:
    """
    Path of the tuner plugin library this module is linked with (give NCCL this one).
    """
def nccl_predict(topology: dict, op: str, bytes: typing.SupportsInt | typing.SupportsIndex, nccl_version: typing.SupportsInt | typing.SupportsIndex = 0) -> dict:
    """
    NCCL's modelled time (us) of every arm of `op` at `bytes` on the described communicator (a topology dict as dynamiccl_pg.topology describes it); 'default' names NCCL's pick.
    """
def nccl_profiler_records(arg0: typing.SupportsInt | typing.SupportsIndex) -> list:
    ...
def policy_keys() -> dict:
    """
    The keys of a policy file's objects, by level (file, group, snapshot, state, arm): every one required, in the order messages name them.
    """
def prior_features(engine: str, op: str, arm: str, effective_bytes: typing.SupportsInt | typing.SupportsIndex, group_size: typing.SupportsInt | typing.SupportsIndex, nodes: typing.SupportsInt | typing.SupportsIndex = 1, exposure: str = 'exposed', fused: bool = False, analytic_ratio: typing.SupportsFloat | typing.SupportsIndex = 1.0) -> list[float]:
    """
    The model's input row for one (state, arm), in prior_schema()['feature_names'] order; analytic_ratio: the engine's analytic prior of the arm over the default's. The model predicts log(measured ratio / analytic_ratio).
    """
def prior_schema() -> dict:
    """
    The learned prior's schema: format, versions, feature names and roles (head order).
    """
def register_ddp_comm_hook(reducer: typing.Any, group: typing.Any) -> None:
    """
    Registers the bucket-hint comm hook (C++) on a DDP reducer, all-reducing on `group`.
    """
def set_hint(arg0: typing.SupportsInt | typing.SupportsIndex, arg1: typing.SupportsInt | typing.SupportsIndex, arg2: typing.SupportsInt | typing.SupportsIndex, arg3: typing.SupportsInt | typing.SupportsIndex, arg4: typing.SupportsInt | typing.SupportsIndex, arg5: typing.SupportsInt | typing.SupportsIndex) -> None:
    ...
def size_bin(arg0: typing.SupportsInt | typing.SupportsIndex) -> int:
    """
    The learner's size bin of a byte count.
    """
def vocabulary() -> dict:
    """
    Every name list the core defines (ops, roles, modes, engines, ...), indexed by value.
    """
EMULATED_NCCL_DEFAULT_RELEASE: str = '2.28'
EMULATED_NCCL_RELEASES: list = ['2.28', '2.30', '2.32']
built_for_torch: str = '2.15.0+cu132'
