"""Malformed policy files are refused whole, with the file and the key path of the bad value;
nothing is restored from them; a valid file still loads."""

import copy
import json
import re

import pytest
import torch
import torch.distributed as dist

import dynamiccl_pg
from dist_harness import run_ranks
from dynamiccl_pg import PolicyError, _C, policy_schema

pytestmark = pytest.mark.timeout(300)

CPU = _C.arm_names(_C.Engine.cpu, "allreduce")
NCCL = _C.arm_names(_C.Engine.nccl, "allreduce")
STATES = 'groups["0"].engines.cpu.states'


def _state(arms, size_bin, incumbent):
    return {"role": "dp", "op": "allreduce", "size_bin": size_bin, "exposure": "exposed",
            "fused": False, "incumbent": incumbent, "converged": True,
            "arms": [{"name": a, "samples": 12, "mean_us": 100.0 + i, "m2": 40.0,
                      "analytic_us": 90.0, "eliminated": False, "step_adopted": False,
                      "step_rejected": False}
                     for i, a in enumerate(arms)]}


def valid_policy():
    """A policy of two ranks' world group, as save_policy writes it."""
    from dynamiccl_pg.policy_io import fingerprint
    engines = {"cpu": {"states": [_state(CPU, 10, "ring"), _state(CPU, 11, "default"),
                                  _state(CPU, 12, "tree"), _state(CPU, 13, "rd")]},
               "nccl": {"states": [_state(NCCL, 20, "tree/LL")]}}
    return {"format": policy_schema.FORMAT, "fingerprint": dict(fingerprint(), world_size=2),
            "groups": {"0": {"group_size": 2, "nodes": 1, "group_desc": "default_pg",
                             "engines": engines}}}


def _set(path, value):
    """A mutation that sets (or with value=KeyError deletes) the item at a key path."""
    def mutate(data):
        *parents, last = path
        for key in parents:
            data = data[key]
        if value is KeyError:
            del data[last]
        else:
            data[last] = value
    return mutate


def _cpu(*path):
    return ("groups", "0", "engines", "cpu", "states") + path


# (case, the file's content: bytes or a mutation of valid_policy(), key path, words in the error)
CASES = [
    ("not JSON", b'{"format": "dynamiccl-policy/4",', None, "is not valid JSON"),
    ("empty file", b"", None, "is not valid JSON"),
    ("binary garbage", b"\x89PNG\r\n\x1a\n\xff\xfe\x00", None, "is not UTF-8 text"),
    ("nested too deep", b"[" * 100000, None, "is not valid JSON"),
    ("duplicate JSON key", b'{"format": 1, "format": 2}', None, "'format' appears twice"),
    ("top level a list", b"[]", "top level", "accepted: an object with keys format"),
    ("format missing", _set(("format",), KeyError), "format", "missing"),
    ("format unknown", _set(("format",), "dynamiccl-policy/0"), "format",
     "accepted: dynamiccl-policy/4"),
    ("unknown top key", _set(("extra",), 1), "extra", "unknown key"),
    ("fingerprint a string", _set(("fingerprint",), "x"), "fingerprint", "an object"),
    ("groups a list", _set(("groups",), []), "groups", "an object"),
    ("group not an object", _set(("groups", "0"), 3), 'groups["0"]', "an object"),
    ("group without engines", _set(("groups", "0", "engines"), KeyError),
     'groups["0"].engines', "missing"),
    ("group_size zero", _set(("groups", "0", "group_size"), 0), 'groups["0"].group_size',
     "integers 1.."),
    ("nodes beyond the group", _set(("groups", "0", "nodes"), 3), 'groups["0"].nodes',
     "integers 1..2"),
    ("unknown engine", _set(("groups", "0", "engines", "tpu"), {"states": []}),
     'groups["0"].engines.tpu', "accepted: engine names cpu, nccl"),
    ("states not a list", _set(_cpu(), {"0": 1}), STATES, "a list"),
    ("state not an object", _set(_cpu(3), 7), f"{STATES}[3]", "an object"),
    ("state without arms", _set(_cpu(3, "arms"), KeyError), f"{STATES}[3].arms", "missing"),
    ("state with unknown key", _set(_cpu(3, "phase"), "exploit"), f"{STATES}[3].phase",
     "unknown key"),
    ("unknown role", _set(_cpu(3, "role"), "warp"), f"{STATES}[3].role",
     "accepted: default, dp"),
    ("unknown op", _set(_cpu(3, "op"), "allreduxe"), f"{STATES}[3].op",
     "accepted: allreduce, broadcast"),
    ("size_bin out of range", _set(_cpu(3, "size_bin"), 48), f"{STATES}[3].size_bin",
     "integers 0..47"),
    ("size_bin negative", _set(_cpu(3, "size_bin"), -1), f"{STATES}[3].size_bin", "0..47"),
    ("size_bin a string", _set(_cpu(3, "size_bin"), "13"), f"{STATES}[3].size_bin", "0..47"),
    ("size_bin a float", _set(_cpu(3, "size_bin"), 13.0), f"{STATES}[3].size_bin", "0..47"),
    ("size_bin a bool", _set(_cpu(3, "size_bin"), True), f"{STATES}[3].size_bin", "0..47"),
    ("incumbent unknown", _set(_cpu(3, "incumbent"), "warp"), f"{STATES}[3].incumbent",
     "accepted: the cpu arms of allreduce: " + ", ".join(CPU)),
    ("incumbent not a string", _set(_cpu(3, "incumbent"), 2), f"{STATES}[3].incumbent",
     "the cpu arms of allreduce"),
    ("nccl incumbent a cpu arm", _set(("groups", "0", "engines", "nccl", "states", 0,
                                       "incumbent"), "rd"),
     'groups["0"].engines.nccl.states[0].incumbent',
     "accepted: default, or ALGO/PROTO, ALGO/PROTO/cN, ALGO/PROTO/kCK or ALGO/PROTO/cN/kCK "
     "with ALGO one of tree"),
    ("converged not a bool", _set(_cpu(3, "converged"), "yes"), f"{STATES}[3].converged",
     "true, false"),
    ("arms not a list", _set(_cpu(3, "arms"), {}), f"{STATES}[3].arms", "a list"),
    ("arm name unknown", _set(_cpu(3, "arms", 1, "name"), "warp"), f"{STATES}[3].arms[1].name",
     "the cpu arms of allreduce"),
    ("arm listed twice", _set(_cpu(3, "arms", 1, "name"), "default"),
     f"{STATES}[3].arms[1].name", "listed twice"),
    ("arm without samples", _set(_cpu(3, "arms", 1, "samples"), KeyError),
     f"{STATES}[3].arms[1].samples", "missing"),
    ("samples negative", _set(_cpu(3, "arms", 1, "samples"), -1),
     f"{STATES}[3].arms[1].samples", "integers 0.."),
    ("samples a float", _set(_cpu(3, "arms", 1, "samples"), 1.5),
     f"{STATES}[3].arms[1].samples", "integers 0.."),
    ("samples beyond 64 bits", _set(_cpu(3, "arms", 1, "samples"), 1 << 64),
     f"{STATES}[3].arms[1].samples", "integers 0.."),
    ("mean_us NaN", _set(_cpu(3, "arms", 1, "mean_us"), float("nan")),
     f"{STATES}[3].arms[1].mean_us", "finite numbers >= 0"),
    ("mean_us infinite", _set(_cpu(3, "arms", 1, "mean_us"), float("inf")),
     f"{STATES}[3].arms[1].mean_us", "finite numbers >= 0"),
    ("mean_us negative", _set(_cpu(3, "arms", 1, "mean_us"), -5.0),
     f"{STATES}[3].arms[1].mean_us", "finite numbers >= 0"),
    ("mean_us a string", _set(_cpu(3, "arms", 1, "mean_us"), "100"),
     f"{STATES}[3].arms[1].mean_us", "finite numbers >= 0"),
    ("m2 negative", _set(_cpu(3, "arms", 1, "m2"), -1.0), f"{STATES}[3].arms[1].m2",
     "finite numbers >= 0"),
    ("eliminated not a bool", _set(_cpu(3, "arms", 1, "eliminated"), 0),
     f"{STATES}[3].arms[1].eliminated", "true, false"),
    ("step verdict not a bool", _set(_cpu(3, "arms", 1, "step_adopted"), "yes"),
     f"{STATES}[3].arms[1].step_adopted", "true, false"),
    ("duplicate state", _set(_cpu(3, "size_bin"), 10), f"{STATES}[3]",
     "already listed at states[0]"),
    ("exposure unknown", _set(_cpu(3, "exposure"), "hidden"), f"{STATES}[3].exposure",
     "exposed, overlapped"),
    ("fused not a bool", _set(_cpu(3, "fused"), 1), f"{STATES}[3].fused", "true, false"),
]


def _write(tmp_path, content):
    path = tmp_path / "policy.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        data = valid_policy()
        content(data)
        path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("case,content,key,words", CASES, ids=[c[0] for c in CASES])
def test_malformed_file_is_refused_naming_file_and_key(tmp_path, case, content, key, words):
    path = _write(tmp_path, content)
    with pytest.raises(PolicyError) as err:
        policy_schema.read(path)
    message = str(err.value)
    assert isinstance(err.value, ValueError)
    assert message.startswith(f"dynamiccl: policy file {path!r}: "), message
    if key is not None:
        assert re.search(": " + re.escape(key) + "[:= ]", message), message
    assert words in message, message


def test_valid_file_is_accepted(tmp_path):
    data = valid_policy()
    assert policy_schema.read(_write(tmp_path, json.dumps(data).encode())) == data


def test_policy_calls_without_a_group_are_refused(tmp_path):
    assert not dist.is_initialized()
    path = _write(tmp_path, json.dumps(valid_policy()).encode())
    for call in (dynamiccl_pg.load_policy, dynamiccl_pg.save_policy):
        with pytest.raises(RuntimeError, match="no dynamiccl process group; call "
                                               r"torch\.distributed\.init_process_group"):
            call(path)


def _learned(pg):
    snap = pg.snapshot(_C.Engine.cpu)
    return snap["states"] if snap else []


def load_all_or_nothing(rank, world, good, bad):
    """A file whose group 1 is malformed restores nothing, not even group 0; the good file
    then restores both; restore() itself names a bad value's key path."""
    from dynamiccl_pg.backend import backend_of
    sub = dist.new_group(backend="dynamiccl")
    world_pg, sub_pg = backend_of(), backend_of(sub)
    before = (_learned(world_pg), _learned(sub_pg))
    out = {}
    try:
        dynamiccl_pg.load_policy(bad)
        out["bad"] = "loaded"
    except PolicyError as e:
        out["bad"] = str(e)
    out["untouched"] = (_learned(world_pg), _learned(sub_pg)) == before
    out["good"] = dynamiccl_pg.load_policy(good)
    out["restored"] = [sorted(s["incumbent"] for s in _learned(pg)) for pg in (world_pg, sub_pg)]
    snap = {"states": [_state(CPU, 3, "warp")]}
    try:
        world_pg.restore(_C.Engine.cpu, snap)
        out["direct"] = "restored"
    except ValueError as e:
        out["direct"] = str(e)
    return out


def test_restore_is_all_or_nothing(tmp_path):
    data = valid_policy()
    data["groups"]["1"] = copy.deepcopy(data["groups"]["0"])
    good = tmp_path / "good.json"
    good.write_text(json.dumps(data))
    data["groups"]["1"]["engines"]["tpu"] = {"states": []}  # after the CPU part of both groups
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    for out in run_ranks(load_all_or_nothing, 2, str(good), str(bad)):
        assert 'groups["1"].engines.tpu' in out["bad"], out["bad"]
        assert out["untouched"]
        assert out["good"] is True
        assert out["restored"] == [["default", "rd", "ring", "tree"]] * 2
        assert re.search(r"states\[0\]\.incumbent='warp' is not accepted; accepted: an arm "
                         r"of allreduce: default, ring", out["direct"]), out["direct"]


def unreachable(rank, world):
    return "group created"


def test_malformed_policy_env_fails_group_creation_on_every_rank(tmp_path):
    path = _write(tmp_path, _set(_cpu(3, "incumbent"), "warp"))
    errors = run_ranks(unreachable, 2, env={"DYNAMICCL_POLICY": path}, timeout=120,
                       expect_failure=True)
    for err in errors:
        assert "PolicyError" in err and path in err, err
        assert f"{STATES}[3].incumbent='warp' is not accepted" in err, err


def save_and_reload(rank, world, path):
    dist.all_reduce(torch.ones(4000))
    dynamiccl_pg.save_policy(path)
    return dynamiccl_pg.load_policy(path)


def test_saved_file_passes_the_checks(tmp_path):
    path = str(tmp_path / "saved.json")
    assert run_ranks(save_and_reload, 2, path) == [True, True]
    assert policy_schema.read(path)["groups"]["0"]["engines"]["cpu"]["states"]
