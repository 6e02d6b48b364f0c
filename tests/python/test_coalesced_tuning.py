"""Coalesced forms are tuned on CPU: what functional collectives, DTensor and compiled graphs send
(`allgather_into_tensor_coalesced`, `reduce_scatter_tensor_coalesced`, `allreduce_coalesced`) is
one decision per batch, identical on every rank, and right."""

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(600)


def _ops_logged():
    import dynamiccl_pg
    from dynamiccl_pg import _C
    ops = _C.vocabulary()["ops"]
    return [ops[e[1]] if isinstance(e[1], int) else e[1] for e in dynamiccl_pg.decision_log()]


def funcol_calls(rank, world, calls):
    import dynamiccl_pg
    import torch.distributed._functional_collectives as funcol
    group = dist.group.WORLD
    wrong = 0
    for i in range(calls):
        x = torch.full((1000,), float(rank + i % 3))
        gathered = funcol.all_gather_tensor(x, 0, group).wait()
        wrong += int(not torch.equal(
            gathered, torch.cat([torch.full((1000,), float(r + i % 3)) for r in range(world)])))
        y = torch.arange(1000.0 * world) + rank
        scattered = funcol.reduce_scatter_tensor(y, "sum", 0, group).wait()
        full = sum(torch.arange(1000.0 * world) + r for r in range(world))
        wrong += int(not torch.equal(scattered, full.chunk(world)[rank]))
    # Coalesced batches, several tensors of one op: one decision each.
    for _ in range(calls // 4):
        xs = [torch.full((500 + k,), float(rank)) for k in range(3)]
        with dist._coalescing_manager(group=group, async_ops=True) as cm:
            for t in xs:
                dist.all_reduce(t)
        cm.wait()
        want = world * (world - 1) / 2
        wrong += int(not all(torch.equal(t, torch.full_like(t, want)) for t in xs))
    return wrong, _ops_logged(), dynamiccl_pg.decision_hash()


@pytest.mark.parametrize("force", ["", "allgather:ring_s4;reduce_scatter:rd",
                                   "allgather:rd;reduce_scatter:ring"])
def test_functional_collectives_are_decided_once_per_batch_and_right(force):
    env = {"DYNAMICCL_ROUND_CALLS": "4"}
    if force:
        env["DYNAMICCL_FORCE"] = force
    results = run_ranks(funcol_calls, 4, 120, env=env)
    assert len({r[2] for r in results}) == 1, "ranks decided differently"
    for wrong, ops, _ in results:
        assert wrong == 0
        assert ops.count("allgather") == 120 and ops.count("reduce_scatter") == 120, ops[:20]
        assert ops.count("allreduce") == 120 // 4  # one per coalesced batch of three


def funcol_avg(rank, world):
    import torch.distributed._functional_collectives as funcol
    y = torch.arange(64.0 * world) * (rank + 1)
    got = funcol.reduce_scatter_tensor(y, "avg", 0, dist.group.WORLD).wait()
    want = (torch.arange(64.0 * world) * sum(range(1, world + 1)) / world).chunk(world)[rank]
    return torch.allclose(got, want)


def test_reduce_scatter_average_on_a_forced_schedule():
    assert all(run_ranks(funcol_avg, 4, env={"DYNAMICCL_FORCE": "reduce_scatter:ring"}))


def dtensor_redistribute(rank, world, steps):
    import dynamiccl_pg
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    full = torch.randn(64, 256)
    wrong = 0
    for _ in range(steps):
        sharded = distribute_tensor(full, mesh, [Shard(0)])
        wrong += int(not torch.equal(sharded.redistribute(mesh, [Replicate()]).to_local(), full))
        partial = DTensor.from_local(full * (rank + 1), mesh, [Partial()])
        wrong += int(not torch.allclose(partial.redistribute(mesh, [Shard(0)]).to_local(),
                                        (full * sum(range(1, world + 1))).chunk(world)[rank]))
    return wrong, _ops_logged(), dynamiccl_pg.decision_hash()


def test_dtensor_redistribute_is_tuned():
    results = run_ranks(dtensor_redistribute, 4, 60)
    assert len({r[2] for r in results}) == 1
    for wrong, ops, _ in results:
        assert wrong == 0
        assert ops.count("allgather") >= 60 and ops.count("reduce_scatter") >= 60, set(ops)


def compiled(rank, world, calls):
    import dynamiccl_pg
    import torch.distributed._functional_collectives as funcol

    @torch.compile(backend="aot_eager", fullgraph=True)
    def step(x):
        return funcol.all_gather_tensor(x * 2, 0, dist.group.WORLD).sum()

    outs = [float(step(torch.full((256,), float(rank)))) for _ in range(calls)]
    want = 2 * 256 * sum(range(world))
    return (all(o == want for o in outs), _ops_logged().count("allgather"),
            dynamiccl_pg.decision_hash())


def test_compiled_graphs_are_tuned():
    results = run_ranks(compiled, 4, 40)
    assert len({r[2] for r in results}) == 1
    for right, allgathers, _ in results:
        assert right and allgathers == 40
