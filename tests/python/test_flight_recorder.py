"""torch's flight recorder sees every call of a dynamiccl group once, under the group's name
(2 real ranks). Our CPU engine records its calls itself (Gloo), so torch attaches no recording
hook to CPU groups, and the engines carry the group's name and description; our schedules and
the consensus rounds travel as the group's own point-to-point messages, which Gloo does not
record. The emulated NCCL records nothing (nor does nccl2): its groups keep torch's hook. Runs
where torch has the hook (2.15); older torch has nothing to check."""

import json
import pickle

import pytest
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from dist_harness import run_ranks
from test_emulated_nccl import CLUSTER

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not hasattr(c10d, "_FR_SELF_RECORDING_BACKENDS"),
                       reason="this torch attaches no flight-recorder hook to any backend"),
]

CALLS = 5


def _gloo_entries():
    from torch._C._distributed_c10d import _dump_fr_trace
    return pickle.loads(_dump_fr_trace(True, False, False))["entries"]


def recorded_calls(rank, world):
    tp = dist.new_group([0, 1], group_desc="mesh_tp")
    t = torch.ones(4)
    for _ in range(CALLS):
        dist.all_reduce(t)
        dist.all_reduce(t, group=tp)
    dist.broadcast(t, 0, group=tp)
    names = {}
    for e in _gloo_entries():
        key = (tuple(e["process_group"]), e["profiling_name"])
        names[key] = names.get(key, 0) + 1
    return {"hooked": len(c10d._world.pg_flight_recorder_hooks), "names": names,
            "default": (dist.group.WORLD.group_name, tp.group_name)}


def test_each_call_is_recorded_once_under_its_groups_name():
    # Rounds of 2 calls: consensus rounds run within these few calls.
    env = {"DYNAMICCL_MODE": "learn", "DYNAMICCL_ROUND_CALLS": "2"}
    for out in run_ranks(recorded_calls, 2, env=env):
        assert out["hooked"] == 0  # no second recording of what the engines record
        world, tp = out["default"]
        names = out["names"]
        # A learned call may run one of our schedules instead (point-to-point messages): at most
        # CALLS all-reduces on a group's engine, each recorded once, and nothing else (the
        # rounds are messages too, not collectives of a group of their own).
        assert names[((world, "default_pg"), "gloo:all_reduce")] <= CALLS
        assert names[((tp, "mesh_tp"), "gloo:all_reduce")] <= CALLS
        assert names[((tp, "mesh_tp"), "gloo:broadcast")] == 1
        assert set(names) <= {((world, "default_pg"), "gloo:all_reduce"),
                              ((tp, "mesh_tp"), "gloo:all_reduce"),
                              ((tp, "mesh_tp"), "gloo:broadcast")}, names


def test_without_learning_each_call_is_one_engine_entry():
    for out in run_ranks(recorded_calls, 2, env={"DYNAMICCL_MODE": "off"}):
        world, tp = out["default"]
        assert out["hooked"] == 0
        assert out["names"][((world, "default_pg"), "gloo:all_reduce")] == CALLS
        assert out["names"][((tp, "mesh_tp"), "gloo:all_reduce")] == CALLS


def hooked(rank, world):
    return len(c10d._world.pg_flight_recorder_hooks)


def test_the_emulated_nccl_keeps_torchs_recording_hook(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(dict(CLUSTER, topology=dict(CLUSTER["topology"], nodes=1))))
    env = {"DYNAMICCL_EMULATE_NCCL": str(path), "DYNAMICCL_EMULATE_NCCL_VERSION": "2.30"}
    assert run_ranks(hooked, 2, env=env) == [1, 1]
