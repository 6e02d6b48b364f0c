"""The backend's NCCL branch end to end, on the emulated NCCL (DYNAMICCL_EMULATE_NCCL): our tuner
plugin loaded by the emulated NCCL as NCCL loads it, decisions published on the group's channel
and applied, unavailable arms dropped on every rank, the plugin agreement, NCCL_ALGO respected,
GPU times read from the inner works — with results checked against exact values.

Every test runs three times: with the emulated NCCL behaving as NCCL 2.28 (tuner ABI v5, the NCCL
of torch 2.11), as NCCL 2.30 (ABI v6 first, getChunkSize after the choice: torch 2.14+) with
non-blocking communicators (the tuner called on NCCL's own thread, not the caller's), and as NCCL
2.32 (ABI v7 first), which users can install beside torch 2.15."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
import torch.distributed as dist

import dynamiccl_pg
from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(600)

# Two nodes of two Ampere GPUs. Truth: the ring algorithm runs at a quarter of what NCCL's model
# believes, so where NCCL's default is a ring the learner has something to find.
CLUSTER = {
    "name": "emulated_test", "seed": 5, "steps": 10,
    "topology": {"nodes": 2, "gpus_per_node": 2, "gpu": "ampere",
                 "intra": {"type": "nvlink", "bw_GBps": 200},
                 "inter": {"type": "ib", "bw_GBps": 12.5, "lat_us": 2}},
    "noise_sigma": 0.02,
    "workload": [{"role": "dp", "op": "allreduce", "bytes": "4MiB"}],
}


def scenario(tmp_path, **truth) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(dict(CLUSTER, truth=truth)))
    return str(path)


# The emulated NCCL of the running test (fixture below): its release, and whether its
# communicators are non-blocking.
RELEASE = {"name": "2.28", "nonblocking": False}
CONFIGS = {"2.28": False, "2.30": True, "2.32": False}
assert set(CONFIGS) == set(dynamiccl_pg._C.EMULATED_NCCL_RELEASES)


@pytest.fixture(autouse=True, params=list(CONFIGS),
                ids=[f"{r}{'-nonblocking' if nb else ''}" for r, nb in CONFIGS.items()])
def nccl_release(request):
    RELEASE.update(name=request.param, nonblocking=CONFIGS[request.param])
    return request.param


# The tuner ABI each release loads first; chunk sizes from 2.30 (ABI v6) on.
TUNER_ABI = {"2.28": 5, "2.30": 6, "2.32": 7}


def chunks(release: str) -> bool:
    return TUNER_ABI[release] >= 6


def emulated(path: str, **extra) -> dict:
    return {"DYNAMICCL_EMULATE_NCCL": path,
            "DYNAMICCL_EMULATE_NCCL_VERSION": RELEASE["name"],
            "DYNAMICCL_EMULATE_NCCL_NONBLOCKING": "1" if RELEASE["nonblocking"] else "0", **extra}


def runs_of(group=None):
    return dynamiccl_pg.backend.backend_of(group).nccl_engine.runs()


# ---- every collective, right -----------------------------------------------------------------

def every_collective(rank, world):
    out = {}
    x = torch.arange(6, dtype=torch.float32) + rank
    t = x.clone(); dist.all_reduce(t); out["allreduce"] = t
    t = x.clone(); dist.all_reduce(t, op=dist.ReduceOp.AVG); out["avg"] = t
    t = x.clone(); dist.all_reduce(t, op=dist.ReduceOp.MAX); out["max"] = t
    t = x.clone(); dist.broadcast(t, src=1); out["broadcast"] = t
    t = x.clone(); dist.reduce(t, dst=2); out["reduce"] = t if rank == 2 else None
    parts = [torch.empty(6) for _ in range(world)]
    dist.all_gather(parts, x); out["allgather"] = torch.cat(parts)
    flat = torch.empty(6 * world); dist.all_gather_into_tensor(flat, x); out["ag_base"] = flat
    big = torch.arange(4 * world, dtype=torch.float32) * (rank + 1)
    rs = torch.empty(4); dist.reduce_scatter_tensor(rs, big); out["rs_base"] = rs
    rs2 = torch.empty(4); dist.reduce_scatter(rs2, list(big.chunk(world))); out["rs_list"] = rs2
    rs3 = torch.empty(4); dist.reduce_scatter_tensor(rs3, big, op=dist.ReduceOp.AVG)
    out["rs_avg"] = rs3
    a2a = torch.empty(world); dist.all_to_all_single(a2a, torch.full((world,), float(rank)))
    out["alltoall"] = a2a
    if rank == 0:
        dist.send(x, dst=1)
    elif rank == 1:
        r = torch.empty(6); dist.recv(r, src=0); out["recv"] = r
    dist.barrier()
    work = dist.all_reduce(x.clone(), async_op=True)
    work.wait()
    out["future"] = work.get_future().value()[0]
    return out, [(r["op"], r["tuner_saw"]) for r in runs_of()]


def test_every_collective_is_right_through_the_emulated_nccl(tmp_path):
    world = 4
    results = run_ranks(every_collective, world, env=emulated(scenario(tmp_path)))
    x = [torch.arange(6, dtype=torch.float32) + r for r in range(world)]
    total = sum(x)
    big = [torch.arange(4 * world, dtype=torch.float32) * (r + 1) for r in range(world)]
    for rank, (out, runs) in enumerate(results):
        assert torch.equal(out["allreduce"], total)
        assert torch.allclose(out["avg"], total / world)
        assert torch.equal(out["max"], x[-1])
        assert torch.equal(out["broadcast"], x[1])
        assert rank != 2 or torch.equal(out["reduce"], total)
        assert torch.equal(out["allgather"], torch.cat(x))
        assert torch.equal(out["ag_base"], torch.cat(x))
        assert torch.equal(out["rs_base"], sum(big).chunk(world)[rank])
        assert torch.equal(out["rs_list"], sum(big).chunk(world)[rank])
        assert torch.allclose(out["rs_avg"], sum(big).chunk(world)[rank] / world)
        assert torch.equal(out["alltoall"], torch.arange(world, dtype=torch.float32))
        assert rank != 1 or torch.equal(out["recv"], x[0])
        assert torch.equal(out["future"], total)
        # Every call went through the emulated NCCL; its tuner saw the collectives it sees.
        seen = Counter(runs)
        assert seen[("allreduce", True)] == 4 and seen[("alltoall", False)] == 1
        assert seen[("reducescatter", True)] + seen[("reduce_scatter", True)] == 3


# ---- the plugin NCCL loads is the one the backend publishes to; decisions are applied ----------

def learn_allreduces(rank, world, calls, nbytes, hint=None):
    t = torch.empty(nbytes // 4)
    wrong = 0
    for _ in range(calls):
        t.fill_(float(rank + 1))
        with dynamiccl_pg.hint(**(hint or {})):
            dist.all_reduce(t)
        wrong += int(not torch.all(t == world * (world + 1) / 2))
    st = dynamiccl_pg.stats()
    arms = dynamiccl_pg.backend.backend_of().arms(dynamiccl_pg._C.Engine.nccl, "allreduce")
    return (wrong, st, arms, dynamiccl_pg.decision_log(), runs_of(), dynamiccl_pg.decision_hash())


def _parse_arm(name):
    """(algo, proto, channel cap) of an NCCL arm name; a chunk part ("/k256K") is _arm_chunk's."""
    algo, proto, *rest = name.split("/")
    caps = [int(part[1:]) for part in rest if part.startswith("c")]
    return algo, proto, caps[0] if caps else -1


def _arm_chunk(name):
    """The chunk size in bytes an NCCL arm name asks for ("ring/Simple/k256K"), or None."""
    chunks = [int(part[1:-1]) * 1024 for part in name.split("/")[2:] if part.startswith("k")]
    return chunks[0] if chunks else None


def test_decisions_reach_the_emulated_nccl_through_the_plugin_it_loaded(tmp_path, nccl_release):
    results = run_ranks(learn_allreduces, 4, 300, 4 << 20,
                        env=emulated(scenario(tmp_path, **{"ring/*": {"bw": 0.25}})))
    hashes = {r[5] for r in results}
    assert len(hashes) == 1, "ranks decided differently"
    for wrong, st, arms, log, runs, _ in results:
        assert wrong == 0
        plugin = st["nccl_plugin"]
        assert plugin["loaded_by_nccl"] and plugin["tuning_active"], plugin
        # NCCL 2.30 loads ABI v6 (2.32: v7) and asks for each tuned call's chunk size, which the
        # plugin keeps (the emulation's default for the protocol, at most the message) unless
        # the arm names one; 2.28 loads v5 and its catalog has no chunk arms.
        v6 = chunks(nccl_release)
        assert plugin["abi_version"] == TUNER_ABI[nccl_release], plugin
        assert (plugin["chunk_size_calls"] == len(runs)) if v6 else plugin["chunk_size_calls"] == 0
        assert all(0 < r["chunk_bytes"] <= 4 << 20 for r in runs if r["tuner_saw"]), runs[:3]
        assert st["nccl_emulated"].endswith("cluster.json")
        assert st["nccl_topology"]["nodes"] == 2 and st["nccl_topology"]["gpus_per_node"] == 2
        # The first NCCL call runs NCCL's own choice (the plugin check: it binds the group's
        # channel); every later one was decided by the learner, published, and is what the
        # emulated NCCL ran.
        assert len(runs) == len(log) + 1
        default_run = (runs[0]["algo"], runs[0]["proto"], runs[0]["channels"])
        applied = 0
        for entry, run in zip(log, runs[1:]):
            name = arms[entry[4]]
            ran = (run["algo"], run["proto"], run["channels"])
            if name == "default":
                assert ran == default_run
            else:
                assert ran == _parse_arm(name), (name, ran)
                if _arm_chunk(name) is not None:
                    assert v6 and run["chunk_bytes"] == _arm_chunk(name), (name, run)
                applied += 1
        # (The plugin check's call published NCCL's own choice, which it applied too.)
        assert plugin["applied"] == applied + 1 and applied > 0
        [state] = st["states"]["nccl"]
        # Rings are slow in truth: whatever it settled on is not one.
        assert not state["incumbent"].startswith("ring"), state


# ---- the channels NCCL runs on (NCCL >= 2.30) ---------------------------------------------------

def test_nccl_reports_the_channels_it_ran_the_default_on(tmp_path, nccl_release):
    # The cluster's communicators run on 16 channels, more than the product assumes by itself for
    # this shape: NCCL 2.30 says so to the tuner per call (getChunkSize), the backend carries it
    # through consensus, and stats() shows it beside the prior's count; the caps derived from the
    # prior's count that hold under a quarter of the 16 (at least its quarter cap) are dropped
    # before any probe. NCCL 2.28 says nothing, and every cap stays.
    # Overlapped calls (priority 0) of 64 MiB: the state has channel caps among its candidates.
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(dict(CLUSTER, topology=dict(CLUSTER["topology"], channels=16))))
    results = run_ranks(learn_allreduces, 4, 60, 64 << 20,
                        {"role": "dp", "priority": 0}, env=emulated(str(path)))
    assert len({r[5] for r in results}) == 1, "ranks decided differently"
    for wrong, st, arms, log, *_ in results:
        assert wrong == 0
        [state] = st["states"]["nccl"]
        assert any("/c" in a for a in arms), arms  # the group offers channel caps
        assert state["exposure"] == "overlapped" and 0 < state["assumed_channels"] < 16, state
        assert state["nccl_channels"] == (16 if chunks(nccl_release) else 0), state
        events = [e["what"] for e in state["events"]]
        dropped = "caps under a quarter of NCCL's channels dropped" in events
        assert dropped == chunks(nccl_release), events
        if dropped:
            ran = {arms[entry[4]] for entry in log} - {"default"}
            ran_caps = {_parse_arm(name)[2] for name in ran}
            assert all(cap < 0 or cap >= 4 for cap in ran_caps), ran_caps


# ---- chunk-size arms (NCCL >= 2.30) -------------------------------------------------------------

CHUNK_ARM = "ring/Simple/k256K"


def forced_allreduces(rank, world, calls, nbytes):
    t = torch.empty(nbytes // 4)
    wrong = 0
    for _ in range(calls):
        t.fill_(float(rank + 1))
        dist.all_reduce(t)
        wrong += int(not torch.all(t == world * (world + 1) / 2))
    return wrong, dynamiccl_pg.stats()["nccl_plugin"], runs_of()


def test_a_forced_chunk_arm_is_applied_and_read_back_per_call(tmp_path, nccl_release):
    env = emulated(scenario(tmp_path), DYNAMICCL_FORCE=f"allreduce:{CHUNK_ARM}")
    if not chunks(nccl_release):
        # NCCL before 2.30 cannot take a chunk size: the arm is not offered, and forcing it is
        # refused at group creation, naming the arm and the arms that are accepted.
        errors = run_ranks(_init_only, 4, env=env, expect_failure=True)
        for e in errors:
            assert f"DYNAMICCL_FORCE arm '{CHUNK_ARM}' is not an arm of allreduce" in e, e
            accepted = e.split("accepted: ", 1)[1]
            assert "ring/Simple" in accepted and "/k" not in accepted, e
            # Both engines' arms, each catalog's "default" named once.
            assert accepted.split(", ").count("default") == 1, e
        return
    calls = 6
    for wrong, plugin, runs in run_ranks(forced_allreduces, 4, calls, 1 << 20, env=env):
        assert wrong == 0
        assert plugin["abi_version"] == TUNER_ABI[nccl_release], plugin
        # The first call is NCCL's own (the plugin check); every later one ran the forced arm
        # with its chunk, as getChunkSize returned it.
        tuned = [r for r in runs if r["tuner_saw"]][1:]
        assert len(tuned) == calls - 1, runs
        for run in tuned:
            assert (run["algo"], run["proto"], run["chunk_bytes"]) == ("ring", "Simple", 256 << 10)
        assert plugin["chunk_size_applied"] == calls - 1, plugin
        assert plugin["chunk_size_rejected"] == 0, plugin


# ---- stepping aside, everywhere, never hanging -------------------------------------------------

def few_allreduces(rank, world):
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrong, st, _, log, runs, h = learn_allreduces(rank, world, 40, 1 << 16)
    return wrong, st, len(log), runs, [str(w.message) for w in caught]


def test_user_nccl_algo_makes_tuning_step_aside_on_every_rank_with_one_warning(tmp_path):
    results = run_ranks(few_allreduces, 4, env=emulated(scenario(tmp_path), NCCL_ALGO="Ring"))
    for wrong, st, logged, runs, _ in results:
        assert wrong == 0
        assert not st["nccl_plugin"]["tuning_active"] and logged == 0
        assert {r["algo"] for r in runs} == {"ring"}  # NCCL_ALGO respected by the emulated NCCL
    # (the warning is issued once per process, at group creation, outside the recorded calls)


def test_user_nccl_algo_on_one_rank_only_fails_group_creation_naming_it(tmp_path):
    # Tuning would step aside on that rank alone and the ranks would run different arms.
    errors = run_ranks(few_allreduces, 4, env=emulated(scenario(tmp_path)),
                       rank_env={1: {"NCCL_ALGO": "Ring"}}, expect_failure=True, timeout=120)
    for err in errors:
        assert isinstance(err, str) and "AgreementError" in err, err
        assert "  NCCL_ALGO: " in err and '"Ring"' in err, err


def test_one_rank_without_the_plugin_makes_every_rank_step_aside(tmp_path):
    results = run_ranks(few_allreduces, 4, env=emulated(scenario(tmp_path)),
                        rank_env={1: {"DYNAMICCL_EMULATE_NCCL_FAULT": "no_plugin"}}, timeout=240)
    for rank, (wrong, st, logged, runs, _) in enumerate(results):
        assert wrong == 0
        assert not st["nccl_plugin"]["tuning_active"], rank
        assert st["nccl_plugin"]["loaded_by_nccl"] == (rank != 1)
        # Nothing decided; where the plugin was loaded, only the check's call (NCCL's own
        # choice) was applied.
        assert logged == 0 and st["nccl_plugin"]["applied"] == (rank != 1)


def test_an_arm_unavailable_on_one_rank_is_dropped_on_every_rank(tmp_path):
    # Trees are slow in truth, so rings (LL128 among them) are worth probing.
    path = scenario(tmp_path, **{"tree/*": {"bw": 0.2, "lat": 3.0}})
    results = run_ranks(learn_allreduces, 4, 300, 1 << 20, env=emulated(path),
                        rank_env={1: {"DYNAMICCL_EMULATE_NCCL_FAULT": "unavailable=ring/LL128"}})
    assert len({r[5] for r in results}) == 1
    per_rank_arms = []
    for rank, (wrong, st, arms, _, _, _) in enumerate(results):
        assert wrong == 0
        [state] = st["states"]["nccl"]
        dropped = {a["name"] for a in state["arms"] if a["eliminated"]}
        per_rank_arms.append(dropped)
        assert not state["incumbent"].startswith("ring/LL128"), state
    assert results[1][1]["nccl_plugin"]["unavailable"] >= 1
    assert all("ring/LL128" in dropped for dropped in per_rank_arms)


# ---- DDP training finds the scenario's best arm ------------------------------------------------

def ddp_training(rank, world, steps):
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(512, 512, bias=False))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = model(torch.randn(8, 512)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    st = dynamiccl_pg.stats()
    weights = next(model.parameters()).detach().clone()
    return st, dynamiccl_pg.decision_hash(), weights


def test_ddp_learns_the_scenarios_best_arm_on_every_rank(tmp_path):
    path = scenario(tmp_path, **{"ring/*": {"bw": 0.25}})
    results = run_ranks(ddp_training, 4, 300, env=emulated(path))
    assert len({h for _, h, _ in results}) == 1
    assert all(torch.equal(w, results[0][2]) for _, _, w in results)  # replicas identical
    from dynamiccl_pg import _C
    from dynamiccl_pg.sim.scenario import load_scenario
    spec = load_scenario(path).to_spec()
    bucket = 512 * 512 * 4
    truth = {a.name: a.truth_us for a in _C.sim.arm_costs(spec, "dp", "allreduce", bucket)}
    best = min(truth.values())
    for st, _, _ in results:
        [state] = [s for s in st["states"]["nccl"] if s["calls"] > 100]
        chosen = state["incumbent"]
        # The backend's catalog derives its caps from its own topology. A cap that the scenario's
        # catalog leaves out holds at least the channels the arm runs on there
        # (engines/nccl/arm_catalog.cpp), so there it is the uncapped arm (seen: tree/LL128/c2).
        truth_name = chosen if chosen in truth else _C.nccl_arm_uncapped(chosen)
        # The truth of the arm it chose (by algorithm/protocol/cap) is within 10% of the best.
        assert truth.get(truth_name, float("inf")) <= 1.10 * best, (chosen, truth)
        assert truth["default"] > 1.3 * best  # NCCL's own choice was wrong here


def test_an_nccl_arm_without_its_cap_keeps_its_algorithm_protocol_and_chunk():
    from dynamiccl_pg import _C
    assert _C.nccl_arm_uncapped("tree/LL128/c2") == "tree/LL128"
    assert _C.nccl_arm_uncapped("ring/Simple/c4/k512K") == "ring/Simple/k512K"
    assert _C.nccl_arm_uncapped("ring/LL") == "ring/LL"
    with pytest.raises(ValueError, match="'tree/c2' is not an NCCL arm name"):
        _C.nccl_arm_uncapped("tree/c2")


# ---- bad input ---------------------------------------------------------------------------------

def _init_only(rank, world):
    return True


def test_bad_emulation_settings_are_named(tmp_path):
    errors = run_ranks(_init_only, 2, env=emulated(str(tmp_path / "missing.json")),
                       expect_failure=True)
    assert all("DYNAMICCL_EMULATE_NCCL=" in e and "missing.json" in e for e in errors), errors
    errors = run_ranks(_init_only, 2, env=emulated(scenario(tmp_path)), expect_failure=True)
    assert all("2 x 2 = 4 GPUs, the world has 2 ranks" in e for e in errors), errors
    errors = run_ranks(_init_only, 4, env=emulated(scenario(tmp_path),
                                                   DYNAMICCL_EMULATE_NCCL_FAULT="broken"),
                       expect_failure=True)
    assert all("DYNAMICCL_EMULATE_NCCL_FAULT='broken' is not accepted" in e for e in errors)


# ---- Policy files name NCCL arms of the group's own catalog -------------------------------------

def load_a_policy_naming_an_arm_this_cluster_lacks(rank, world, path):
    import json
    learn_allreduces(rank, world, 80, 1 << 16)
    dynamiccl_pg.save_policy(path)  # every rank writes the same file
    dist.barrier()
    # Its NCCL arms are this cluster's (channel caps of 2 ranks per node): it loads back.
    round_trip = dynamiccl_pg.load_policy(path)
    before = dynamiccl_pg.stats()["states"]
    data = json.load(open(path))
    [group] = data["groups"].values()
    nccl_state = group["engines"]["nccl"]["states"][0]
    nccl_state["incumbent"] = "nvls/Simple"  # offered on NVSwitch machines, not on these Amperes
    edited = f"{path}.{rank}.json"
    with open(edited, "w") as f:
        json.dump(data, f)
    try:
        dynamiccl_pg.load_policy(edited)
        error = None
    except dynamiccl_pg.PolicyError as e:
        error = str(e)
    return round_trip, error, before == dynamiccl_pg.stats()["states"]


def test_a_policy_naming_an_nccl_arm_the_group_lacks_is_refused_and_nothing_restored(tmp_path):
    for round_trip, error, untouched in run_ranks(
            load_a_policy_naming_an_arm_this_cluster_lacks, 4, str(tmp_path / "policy.json"),
            env=emulated(scenario(tmp_path)), timeout=240):
        assert round_trip is True
        assert error and "engines.nccl.states[0] names arm 'nvls/Simple'" in error, error
        assert "accepted: default, tree/LL" in error, error
        assert untouched  # the CPU part, checked first in file order, was not restored either
