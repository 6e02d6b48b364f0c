"""DDP on "dynamiccl" trains exactly like DDP on Gloo when the same algorithm runs (mode off, or
the native arm forced), closely when the learner explores our schedules, and the comm hook hands
bucket hints to the learner without changing DDP's arithmetic."""

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(600)


def _train(rank, world, backend_group, use_hook, steps=12):
    import dynamiccl_pg
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 48), nn.ReLU(),
                          nn.Linear(48, 1))
    ddp = nn.parallel.DistributedDataParallel(model, process_group=backend_group,
                                              bucket_cap_mb=0.01)
    if use_hook:
        dynamiccl_pg.register_ddp_hook(ddp, backend_group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        x = torch.randn(8, 32, generator=gen)
        loss = ddp(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def ddp_vs_gloo(rank, world, use_hook):
    import dynamiccl_pg
    gloo = dist.new_group(backend="gloo")
    ours = _train(rank, world, None, use_hook)
    ref = _train(rank, world, gloo, False)
    states = dynamiccl_pg.stats()["states"]["cpu"]
    roles = sorted({s["role"] for s in states if s["op"] == "allreduce"})
    return ours, ref, roles


@pytest.mark.parametrize("use_hook", [False, True], ids=["builtin_hook", "bucket_hint_hook"])
@pytest.mark.parametrize("env", [{"DYNAMICCL_MODE": "off"},
                                 {"DYNAMICCL_FORCE": "allreduce:default"}])
def test_ddp_exactly_matches_gloo_with_the_same_algorithm(env, use_hook):
    for ours, ref, _ in run_ranks(ddp_vs_gloo, 2, use_hook, env=env):
        assert torch.equal(ours, ref)


def hook_misuse(rank, world):
    import dynamiccl_pg
    ddp = nn.parallel.DistributedDataParallel(nn.Linear(4, 1))
    errors = []
    for bad in (lambda: dynamiccl_pg.register_ddp_hook(nn.Linear(4, 1)),
                lambda: dynamiccl_pg.register_ddp_hook(ddp, group="world")):
        with pytest.raises(TypeError) as e:
            bad()
        errors.append(str(e.value))
    dynamiccl_pg.register_ddp_hook(ddp)
    with pytest.raises(RuntimeError, match="only be called once"):
        dynamiccl_pg.register_ddp_hook(ddp)
    return errors


def test_ddp_hook_refuses_a_model_that_is_not_ddp_a_group_that_is_not_one_and_a_second_hook():
    errors = run_ranks(hook_misuse, 2)[0]
    assert "expects a DistributedDataParallel model, got Linear" in errors[0]
    assert "group must be a ProcessGroup or None, got str" in errors[1]


def test_ddp_learning_with_bucket_hints_stays_close_to_gloo():
    results = run_ranks(ddp_vs_gloo, 4, True, env={"DYNAMICCL_ROUND_CALLS": "4"})
    for ours, ref, roles in results:
        assert torch.allclose(ours, ref, rtol=1e-4, atol=1e-5)
        assert roles == ["dp"]  # the hook's bucket hints put the buckets in the DP head
    # every rank trains the same replica
    assert all(torch.equal(results[0][0], r[0]) for r in results)
