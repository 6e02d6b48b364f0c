"""A learned prior in the backend, real processes: it orders and prunes the arms every rank
probes, identically on every rank, and a model that cannot be used stops group creation with a
named error (or, where asked, falls back to the analytic prior with a warning)."""

import json
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from dist_harness import ROOT, run_ranks

pytestmark = pytest.mark.timeout(600)

KIB = 1024
HOPELESS = ("rd", "hd")  # the planted rule: these cost 4x the default on this cluster


def _policy_file(path, group_size):
    """A job's policy as save_policy writes it: CPU all-reduce states of several sizes where the
    planted arms cost 4x the default and every other arm what the default costs."""
    from dynamiccl_pg import _C
    arms = _C.arm_names(_C.Engine.cpu, "allreduce")
    states = []
    for size_bin in range(8, 22):
        states.append({
            "role": "default", "op": "allreduce", "size_bin": size_bin, "exposure": "exposed",
            "fused": False, "incumbent": "default", "converged": True,
            "arms": [{"name": a, "samples": 16, "mean_us": 400.0 if a in HOPELESS else 100.0,
                      "m2": 0.0, "analytic_us": 100.0, "eliminated": a in HOPELESS,
                      "step_adopted": False, "step_rejected": False} for a in arms]})
    group = {"group_size": group_size, "nodes": 1, "group_desc": "default_pg",
             "engines": {"cpu": {"states": states}}}
    from dynamiccl_pg.policy_io import write_policy_file
    write_policy_file(str(path), {}, {"0": group})


@pytest.fixture(scope="module")
def planted_prior(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prior")
    for n in (2, 4, 8):
        _policy_file(folder / f"job{n}.json", n)
    model = folder / "prior.pt"
    subprocess.run([sys.executable, "-m", "dynamiccl_pg", "prior", "train", "--data",
                    str(folder), "--out", str(model), "--epochs", "300"], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    return str(model)


def allreduce_states(rank, world, calls):
    """64 KiB all-reduces, checked; the all-reduce state's candidates and the decision hash."""
    import dynamiccl_pg
    for i in range(calls):
        t = torch.full((16 * KIB,), float(rank + i))
        dist.all_reduce(t)
        assert torch.all(t == sum(r + i for r in range(world)))
    stats = dynamiccl_pg.stats()
    state = next(s for s in stats["states"]["cpu"] if s["op"] == "allreduce")
    return {"arms": {a["name"]: a["prior_us"] for a in state["arms"]},
            "sigmas": {a["name"]: a["prior_sigma"] for a in state["arms"]},
            "prior": stats["prior"], "hash": dynamiccl_pg.decision_hash()}


def test_the_learned_prior_prunes_what_it_learned_is_hopeless_on_every_rank_alike(planted_prior):
    analytic = run_ranks(allreduce_states, 4, 200)
    learned = run_ranks(allreduce_states, 4, 200, env={"DYNAMICCL_PRIOR": planted_prior})
    assert any(a in analytic[0]["arms"] for a in HOPELESS), analytic[0]
    assert analytic[0]["prior"] == "analytic" and learned[0]["prior"] == planted_prior
    # How sure the prior was: the analytic one says nothing; the model its sigma (the default is
    # the reference its ratios are predicted against).
    assert set(analytic[0]["sigmas"].values()) == {None}, analytic[0]
    assert learned[0]["sigmas"]["default"] == 0.0, learned[0]
    assert all(0 < s <= 0.35 for a, s in learned[0]["sigmas"].items() if a != "default"), learned[0]
    for res in learned:
        assert not any(a in res["arms"] for a in HOPELESS), res
        assert "default" in res["arms"], res  # the default is always measured
    # Every rank ordered, pruned and decided alike.
    assert len({json.dumps(r["arms"], sort_keys=True) for r in learned}) == 1, learned
    assert len({r["hash"] for r in learned}) == 1, learned


def _group_creation_error(rank, world):
    return "created"


@pytest.mark.parametrize("content,problem", [
    (b"not a model", "not a TorchScript archive"),
    (None, "cannot be opened"),
])
def test_a_model_that_cannot_be_used_fails_group_creation_naming_it(tmp_path, content, problem):
    path = tmp_path / "prior.pt"
    if content is not None:
        path.write_bytes(content)
    errs = run_ranks(_group_creation_error, 2, env={"DYNAMICCL_PRIOR": str(path)},
                     expect_failure=True, timeout=120)
    for err in errs:
        assert isinstance(err, str) and "DYNAMICCL_PRIOR=" in err and str(path) in err, err
        assert problem in err, err


def _warned(rank, world):
    import warnings

    import dynamiccl_pg
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = dist.new_group(backend="dynamiccl")
        t = torch.ones(4)
        dist.all_reduce(t, group=g)
    warned = [str(w.message) for w in caught if "prior model" in str(w.message)]
    from dynamiccl_pg import config
    return (warned, t.tolist(), dynamiccl_pg.stats()["prior"], dynamiccl_pg.stats(g)["prior"],
            sorted(config._PRIOR_WARNED))


def test_with_fallback_a_bad_model_warns_once_and_the_analytic_prior_runs(tmp_path):
    path = tmp_path / "prior.pt"
    path.write_bytes(b"garbage")
    res = run_ranks(_warned, 2, env={"DYNAMICCL_PRIOR": str(path),
                                     "DYNAMICCL_PRIOR_FALLBACK": "analytic"})
    for warned, values, default_group_prior, new_group_prior, warned_for in res:
        assert values == [2.0] * 4
        assert default_group_prior == new_group_prior == "analytic"
        # Once per process: the default group's creation warned, the second group's did not.
        assert warned_for == [str(path)] and warned == [], (warned_for, warned)
