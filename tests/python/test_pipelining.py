"""torch.distributed.pipelining on "dynamiccl" (4 CPU ranks): a 1F1B schedule matches a sequential
reference and carries role, stage and direction hints on every batch of sends and receives; a
torch whose pipelining internals differ gets no hints and one warning. It patches torch
internals, so CI runs it on the oldest and the newest supported torch (scripts/test.sh --short).
"""

import pytest
import torch

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(300)

WORLD = 4


def _role_id(name):
    from dynamiccl_pg import config
    return config.ROLES.index(name)



def _stage_modules(stages):
    torch.manual_seed(0)
    return [torch.nn.Sequential(torch.nn.Linear(12, 12), torch.nn.Tanh()) for _ in range(stages)]


def pipeline_1f1b(rank, world, microbatches):
    import dynamiccl_pg
    import dynamiccl_pg.pipelining
    from dynamiccl_pg import _C
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, schedules

    modules = _stage_modules(world)
    stage = PipelineStage(modules[rank], rank, world, torch.device("cpu"))
    schedule = Schedule1F1B(stage, microbatches, loss_fn=torch.nn.functional.mse_loss)
    batches = []
    issue = schedules._batch_p2p

    def spy(ops, *args, **kwargs):  # what the backend reads when a batch's ops are issued
        if ops:  # (torch 2.14+ also funnels empty batches through it)
            batches.append((_C.get_hint(), sorted(op.op.__name__ for op in ops)))
        return issue(ops, *args, **kwargs)

    # Installed under annotate's wrapper (torch 2.14+ issues one-direction batches without
    # batch_isend_irecv, so the funnel every schedule uses is where to look).
    schedules._batch_p2p = spy
    assert dynamiccl_pg.pipelining.annotate(schedule) == 1
    try:
        g = torch.Generator().manual_seed(5)
        x, y = torch.randn(8, 12, generator=g), torch.randn(8, 12, generator=g)
        losses = []
        if rank == 0:
            schedule.step(x)
        elif rank == world - 1:
            schedule.step(target=y, losses=losses)
        else:
            schedule.step()
    finally:
        schedules._batch_p2p = issue
    grads = [p.grad.tolist() for p in modules[rank].parameters()]
    # Sequential reference on one process: the same layers, the same microbatches.
    ref = _stage_modules(world)
    ref_losses = [torch.nn.functional.mse_loss(torch.nn.Sequential(*ref)(xm), ym)
                  for xm, ym in zip(x.chunk(microbatches), y.chunk(microbatches))]
    torch.stack(ref_losses).mean().backward()
    ref_grads = [p.grad.tolist() for p in ref[rank].parameters()]
    pg = dynamiccl_pg.backend.backend_of()
    traced = [rec[4] for rec in pg.trace_records() if rec[1] in ("send", "recv")]
    return {"batches": batches, "losses": [v.item() for v in losses],
            "ref_losses": [v.item() for v in ref_losses], "grads": grads, "ref_grads": ref_grads,
            "traced": traced, "group_role": pg.group_role, "hint_after": _C.get_hint()}


def test_pipeline_1f1b_matches_sequential_and_carries_pp_hints(tmp_path):
    results = run_ranks(pipeline_1f1b, WORLD, 4, timeout=240,
                        env={"DYNAMICCL_TRACE": str(tmp_path / "trace")})
    pp, fwd, bwd = _role_id("pp"), 0, 1
    last = results[-1]
    assert len(last["losses"]) == 4
    for got, want in zip(last["losses"], last["ref_losses"]):
        assert abs(got - want) <= 1e-6 * max(1.0, abs(want))
    for rank, r in enumerate(results):
        for g, w in zip(r["grads"], r["ref_grads"]):
            assert torch.allclose(torch.tensor(g), torch.tensor(w), rtol=1e-5, atol=1e-7), \
                f"rank {rank}: gradients differ"
        assert r["hint_after"] == (-1,) * 6
        # Every batch of P2P ops was issued with role pp and this rank's stage in scope.
        assert r["batches"], f"rank {rank} issued no P2P batch"
        assert {h[0] for h, _ in r["batches"]} == {pp}, r["batches"]
        assert {h[3] for h, _ in r["batches"]} == {rank}
        directions = {h[4] for h, _ in r["batches"]}
        # Forward activations and backward gradients are told apart (mixed batches: unset).
        assert directions <= {fwd, bwd, -1}
        if rank > 0:
            assert fwd in directions  # receives activations
        if rank < WORLD - 1:
            assert bwd in directions  # receives gradients
        for hint, names in r["batches"]:
            if hint[4] == fwd and rank == 0:
                assert names == ["isend"]  # the first stage only sends activations
            if hint[4] == bwd and rank == 0:
                assert names == ["irecv"]  # ... and only receives gradients
    # The backend's own record: each op of a tagged batch is one send/recv call with role pp.
    # (Shape inference's send_object_list is not part of a batch and keeps the group's role.)
    for rank, r in enumerate(results):
        in_batches = sum(len(names) for _, names in r["batches"])
        assert r["traced"].count("pp") == in_batches, f"rank {rank}: {r['traced']}"
        assert set(r["traced"]) <= {"pp", r["group_role"]}


def test_pipelining_of_another_shape_is_left_untagged_with_one_warning(monkeypatch):
    """A torch whose pipelining internals differ (here: the funnel takes other arguments first,
    then a stage lacks a builder) gets no hints and one warning, never a wrong tag."""
    import warnings

    import dynamiccl_pg.pipelining as pipelining
    from torch.distributed.pipelining import schedules

    class Stage:  # quacks like a PipelineStage
        stage_index = 0

        def __init__(self):
            for name in pipelining._BUILDERS:
                setattr(self, name, lambda *a: [])

    monkeypatch.setattr(schedules, "_batch_p2p", lambda group, ops: None)
    stage = Stage()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert pipelining.annotate(stage) == 0
    assert len(caught) == 1 and "_batch_p2p(p2p_ops" in str(caught[0].message)
    assert not hasattr(stage.get_fwd_send_ops, pipelining._MARK)

    monkeypatch.setattr(schedules, "_batch_p2p", lambda p2p_ops, desc=None: [])
    del stage.get_bwd_send_ops
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert pipelining.annotate(stage) == 0
    assert len(caught) == 1 and "get_bwd_send_ops" in str(caught[0].message)
    assert not getattr(schedules._batch_p2p, pipelining._MARK, False)
