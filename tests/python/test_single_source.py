"""Defaults and policy-file keys are written once, in the core, and read from there: the
configuration's defaults are BackendConfig's (and the learner's), and the policy file's keys are
the ones the bindings write and read and policy_schema checks."""

import copy
import json
import os
import tempfile

import pytest
import torch
import torch.distributed as dist

import dynamiccl_pg
from dist_harness import run_ranks
from dynamiccl_pg import PolicyError, _C, config, policy_schema
from test_policy_files import valid_policy

DEFAULTS = _C.backend_defaults()
KEYS = _C.policy_keys()


def test_the_environments_defaults_are_the_cores(monkeypatch):
    for name in list(config.ENV_VARS) + ["TORCH_DISTRIBUTED_DEBUG"]:
        monkeypatch.delenv(name, raising=False)
    cfg = config.resolve()
    for key in ("mode", "round_calls", "cost_reduce", "decision_log", "step_regression",
                "loss_stall_rounds", "check_calls"):
        assert cfg[key] == DEFAULTS[key], key
    assert cfg["nccl_plugin"] == DEFAULTS["nccl_tuning"]
    assert cfg["heads"] == [("all", "regret_budget", DEFAULTS["regret_budget"])]
    assert cfg["emulate_nccl_version"] == _C.EMULATED_NCCL_DEFAULT_RELEASE
    # DYNAMICCL_REGRET_BUDGET sets every head: its default is every default head's.
    assert {h["regret_budget"] for h in _C.default_heads().values()} == {DEFAULTS["regret_budget"]}


def test_the_schema_checks_the_cores_keys():
    assert (policy_schema._TOP_KEYS, policy_schema._GROUP_KEYS, policy_schema._SNAPSHOT_KEYS,
            policy_schema._STATE_KEYS, policy_schema._ARM_KEYS) == tuple(
                tuple(KEYS[level]) for level in ("file", "group", "snapshot", "state", "arm"))


# Where each level's first object is in valid_policy().
_AT = {"file": ((), ""), "group": (("groups", "0"), 'groups["0"]'),
       "snapshot": (("groups", "0", "engines", "cpu"), 'groups["0"].engines.cpu'),
       "state": (("groups", "0", "engines", "cpu", "states", 0),
                 'groups["0"].engines.cpu.states[0]'),
       "arm": (("groups", "0", "engines", "cpu", "states", 0, "arms", 0),
               'groups["0"].engines.cpu.states[0].arms[0]')}
_LISTED = [(level, key) for level in _AT for key in KEYS[level]]


def _check(tmp_path, data):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PolicyError) as err:
        policy_schema.read(str(path))
    return str(err.value)


@pytest.mark.parametrize("level,key", _LISTED, ids=[f"{lv}.{k}" for lv, k in _LISTED])
def test_every_listed_key_is_required_and_checked(tmp_path, level, key):
    steps, at = _AT[level]
    where = f"{at}.{key}" if at else key
    for value in (KeyError, None):
        data = valid_policy()
        obj = data
        for step in steps:
            obj = obj[step]
        if value is KeyError:
            del obj[key]
            assert f"{where}: missing" in _check(tmp_path, data)
        else:
            obj[key] = value
            assert f"{where}=None is not accepted" in _check(tmp_path, data)


def written_and_read_keys(rank, world):
    from dynamiccl_pg.backend import backend_of
    for _ in range(64):  # past warm-up: the state has measured arms
        dist.all_reduce(torch.ones(4000))
    pg = backend_of()
    snap = pg.snapshot(_C.Engine.cpu)
    state = snap["states"][0]
    written = {"snapshot": list(snap), "state": list(state), "arm": list(state["arms"][0])}
    # The file and group levels are written by policy_io.save_policy.
    path = os.path.join(tempfile.mkdtemp(), "policy.json")
    dynamiccl_pg.save_policy(path)
    with open(path) as f:
        saved = json.load(f)
    written["file"] = list(saved)
    written["group"] = list(next(iter(saved["groups"].values())))
    refused = {}
    for level, key in [("snapshot", "states")] + [("state", k) for k in KEYS["state"]] + [
            ("arm", k) for k in KEYS["arm"]]:
        bad = copy.deepcopy(snap)
        obj = {"snapshot": bad, "state": bad["states"][0], "arm": bad["states"][0]["arms"][0]}
        del obj[level][key]
        try:
            pg.restore(_C.Engine.cpu, bad)
            refused[key] = "restored"
        except ValueError as e:
            refused[key] = str(e)
    return written, refused


def test_the_writers_write_and_the_bindings_read_the_listed_keys():
    [(written, refused)] = run_ranks(written_and_read_keys, 1)
    for level, keys in written.items():
        assert sorted(keys) == sorted(KEYS[level]), level
    for key, message in refused.items():
        assert f"has no key '{key}'" in message, (key, message)
