"""The CPU schedules (csrc/backend/cpu_algo_*.cpp) through the public path: every non-default
CPU arm is forced with DYNAMICCL_FORCE on a "dynamiccl" group and compared with plain Gloo in
the same run, over reduce ops x dtypes, sizes that do not divide evenly, sizes below the rank
count and zero, at 2..8 ranks.

Data are small integers (also for float dtypes), so every result is exact whatever the
summation order and is compared bit for bit; one random-float case per all-reduce arm is
compared within summation-order tolerance and must be bit-identical on every rank. The decision
log proves the forced arm really ran. One spawn per world size runs the whole matrix.
"""

import os
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(900)

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64, torch.uint8]
ARITH = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
BITWISE = [R.BAND, R.BOR, R.BXOR]
REDUCING = {"allreduce", "reduce_scatter", "reduce"}

# Each dict is one group's DYNAMICCL_FORCE; together they force every non-default CPU arm
# (test_force_sets_cover_every_arm checks that against the catalog).
FORCE_SETS = [
    {"allreduce": "ring", "allgather": "ring", "reduce_scatter": "ring", "broadcast": "tree",
     "reduce": "tree", "alltoall": "pairwise"},
    {"allreduce": "ring_s4", "allgather": "ring_s4", "reduce_scatter": "ring_s4",
     "broadcast": "tree_s4", "reduce": "tree_s4", "alltoall": "bruck"},
    {"allreduce": "rd", "allgather": "rd", "reduce_scatter": "rd", "broadcast": "ring_s8",
     "reduce": "ring_s8"},
    {"allreduce": "hd"},
    {"allreduce": "tree"},
    {"allreduce": "tree_s4"},
]

# The documented, stable arm names (csrc/engines/cpu/arm_catalog.h), in arm order.
ARM_NAMES = {
    "allreduce": ["default", "ring", "ring_s4", "rd", "hd", "tree", "tree_s4"],
    "allgather": ["default", "ring", "ring_s4", "rd"],
    "reduce_scatter": ["default", "ring", "ring_s4", "rd"],
    "broadcast": ["default", "ring_s8", "tree", "tree_s4"],
    "reduce": ["default", "ring_s8", "tree", "tree_s4"],
    "alltoall": ["default", "pairwise", "bruck"],
}


def _combos():
    """(dtype, op) pairs Gloo accepts: bitwise ops only on integers."""
    for dtype in DTYPES:
        for op in ARITH + ([] if dtype.is_floating_point else BITWISE):
            yield dtype, op


def _data(n, dtype, op, seed, rank):
    """Per-rank data whose reduction is exact in every dtype and order at up to 8 ranks."""
    g = torch.Generator().manual_seed(seed * 1009 + rank)
    if op in BITWISE:
        high = 256 if dtype == torch.uint8 else 1 << 30
        return torch.randint(0, high, (n,), generator=g).to(dtype)
    if op == R.PRODUCT:  # powers of two: exact even in bfloat16 (at most 2^8 in magnitude)
        vals = torch.tensor([1, 2] if dtype == torch.uint8 else [-2, -1, 1, 2])
        return vals[torch.randint(0, len(vals), (n,), generator=g)].to(dtype)
    if dtype == torch.uint8:  # sums wrap the same way on both sides
        return torch.randint(0, 100, (n,), generator=g).to(dtype)
    return torch.randint(-4, 5, (n,), generator=g).to(dtype)


class Checker:
    def __init__(self):
        self.failures = []
        self.checked = 0

    def exact(self, name, got, want):
        self.checked += 1
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            self.failures.append(f"{name}: got {got.dtype}{tuple(got.shape)} "
                                 f"{got.flatten()[:6].tolist()} want {want.dtype}"
                                 f"{tuple(want.shape)} {want.flatten()[:6].tolist()}")

    def close(self, name, got, want):
        self.checked += 1
        if not torch.allclose(got, want, rtol=1e-5, atol=1e-4):
            err = (got - want).abs().max().item()
            self.failures.append(f"{name}: max abs error {err}")


def _check_allreduce(rank, world, g, gloo, chk, tag):
    n_odd = 2 * world + 3
    cases = [(n_odd, dt, op) for dt, op in _combos()]
    cases += [(n, dt, op) for n in (0, 1, world - 1, world + 1, 1003)
              for dt, op in ((torch.int32, R.SUM), (torch.float32, R.MAX), (torch.uint8, R.BXOR))]
    for i, (n, dtype, op) in enumerate(cases):
        x = _data(n, dtype, op, i, rank)
        want = x.clone()
        dist.all_reduce(want, op, group=gloo)
        got = x.clone()
        dist.all_reduce(got, op, group=g)
        chk.exact(f"{tag} allreduce n={n} {dtype} {op}", got, want)
    # Multi-dimensional, and asynchronous.
    x = _data(3 * world + 1, torch.int64, R.SUM, 7, rank).view(-1, 1)
    want = x.clone()
    dist.all_reduce(want, group=gloo)
    got = x.clone()
    dist.all_reduce(got, group=g, async_op=True).wait()
    chk.exact(f"{tag} allreduce 2-D async", got, want)
    # AVG is rewritten by the backend around our SUM schedule.
    x = _data(n_odd, torch.float32, R.SUM, 8, rank)
    want = x.clone()
    dist.all_reduce(want, group=gloo)
    got = x.clone()
    dist.all_reduce(got, R.AVG, group=g)
    chk.close(f"{tag} allreduce AVG", got, want / world)
    # Random floats: summation order may differ from Gloo, but every rank gets the same bits.
    for n in (5, 100_003):
        x = torch.randn(n, generator=torch.Generator().manual_seed(n * 31 + rank))
        want = x.clone()
        dist.all_reduce(want, group=gloo)
        got = x.clone()
        dist.all_reduce(got, group=g)
        chk.close(f"{tag} allreduce random n={n}", got, want)
        everyone = [torch.empty_like(got) for _ in range(world)]
        dist.all_gather(everyone, got, group=gloo)
        chk.exact(f"{tag} allreduce random n={n} same bits on every rank",
                  torch.stack([e.view(torch.int32) for e in everyone]),
                  got.view(torch.int32).expand(world, -1).contiguous())


def _check_reduce_scatter(rank, world, g, gloo, chk, tag):
    n_odd = world + 2
    cases = [(n_odd, dt, op) for dt, op in _combos()]
    cases += [(n, dt, op) for n in (0, 1, world - 1, world + 1, 1003)
              for dt, op in ((torch.int64, R.SUM), (torch.bfloat16, R.MIN))]
    for i, (n, dtype, op) in enumerate(cases):
        x = _data(n * world, dtype, op, 100 + i, rank)
        want = torch.empty(n, dtype=dtype)
        dist.reduce_scatter_tensor(want, x, op, group=gloo)
        got = torch.full((n,), 3, dtype=dtype)
        before = x.clone()
        dist.reduce_scatter_tensor(got, x, op, group=g)
        chk.exact(f"{tag} reduce_scatter n={n} {dtype} {op}", got, want)
        chk.exact(f"{tag} reduce_scatter n={n} input untouched", x, before)
    # List form.
    parts = [_data(world + 1, torch.int32, R.SUM, 200 + r, rank) for r in range(world)]
    want = torch.empty(world + 1, dtype=torch.int32)
    dist.reduce_scatter(want, [p.clone() for p in parts], group=gloo)
    got = torch.empty_like(want)
    dist.reduce_scatter(got, parts, group=g)
    chk.exact(f"{tag} reduce_scatter list", got, want)


def _check_reduce(rank, world, g, gloo, chk, tag):
    cases = [(2 * world + 3, dt, op) for dt, op in _combos()]
    cases += [(n, dt, op) for n in (0, 1, world - 1, world + 1, 1003)
              for dt, op in ((torch.int32, R.PRODUCT), (torch.float64, R.SUM))]
    for i, (n, dtype, op) in enumerate(cases):
        root = i % world  # every root gets its turn
        x = _data(n, dtype, op, 300 + i, rank)
        want = x.clone()
        dist.reduce(want, root, op, group=gloo)
        got = x.clone()
        dist.reduce(got, root, op, group=g)
        if rank == root:
            chk.exact(f"{tag} reduce n={n} {dtype} {op} root={root}", got, want)
        else:  # our schedules leave non-root tensors as they were (as NCCL does)
            chk.exact(f"{tag} reduce n={n} {dtype} {op} root={root} non-root", got, x)


def _check_allgather(rank, world, g, gloo, chk, tag):
    for i, (n, dtype) in enumerate((n, dt) for n in (0, 1, world - 1, world + 1, 1003)
                                   for dt in DTYPES):
        x = _data(n, dtype, R.BXOR if not dtype.is_floating_point else R.SUM, 400 + i, rank)
        want = torch.empty(n * world, dtype=dtype)
        dist.all_gather_into_tensor(want, x, group=gloo)
        got = torch.full((n * world,), 5, dtype=dtype)
        dist.all_gather_into_tensor(got, x, group=g)
        chk.exact(f"{tag} allgather n={n} {dtype}", got, want)
    # List form, and the in-place form (input is this rank's slice of the output).
    x = _data(world + 1, torch.float64, R.SUM, 450, rank)
    want = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(want, x, group=gloo)
    got = [torch.zeros_like(x) for _ in range(world)]
    dist.all_gather(got, x, group=g)
    chk.exact(f"{tag} allgather list", torch.stack(got), torch.stack(want))
    out = torch.zeros(world * x.numel(), dtype=x.dtype)
    mine = out.narrow(0, rank * x.numel(), x.numel())
    mine.copy_(x)
    dist.all_gather_into_tensor(out, mine, group=g)
    chk.exact(f"{tag} allgather in place", out, torch.cat(want))


def _check_broadcast(rank, world, g, gloo, chk, tag):
    for i, (n, dtype) in enumerate((n, dt) for n in (0, 1, world - 1, world + 1, 1003)
                                   for dt in DTYPES):
        root = i % world
        x = _data(n, dtype, R.SUM, 500 + i, rank)
        want = x.clone()
        dist.broadcast(want, root, group=gloo)
        got = x.clone()
        dist.broadcast(got, root, group=g)
        chk.exact(f"{tag} broadcast n={n} {dtype} root={root}", got, want)


def _check_alltoall(rank, world, g, gloo, chk, tag):
    for i, (n, dtype) in enumerate((n, dt) for n in (0, 1, world + 1, 1003) for dt in DTYPES):
        x = _data(n * world, dtype, R.SUM, 600 + i, rank)
        want = torch.empty_like(x)
        dist.all_to_all_single(want, x, group=gloo)
        got = torch.full_like(x, 7)
        dist.all_to_all_single(got, x, group=g)
        chk.exact(f"{tag} alltoall n={n} {dtype}", got, want)
    # Rows (dim 0 is split), and uneven splits (our schedules run equal ones; these stay Gloo's).
    x = _data(world * 3 * 5, torch.int64, R.SUM, 650, rank).view(world * 3, 5)
    want = torch.empty_like(x)
    dist.all_to_all_single(want, x, group=gloo)
    got = torch.zeros_like(x)
    dist.all_to_all_single(got, x, group=g)
    chk.exact(f"{tag} alltoall rows", got, want)
    splits_in = [(rank + j) % 3 + 1 for j in range(world)]
    splits_out = [(r + rank) % 3 + 1 for r in range(world)]
    x = _data(sum(splits_in), torch.float32, R.SUM, 660, rank)
    want = torch.empty(sum(splits_out))
    dist.all_to_all_single(want, x, splits_out, splits_in, group=gloo)
    got = torch.zeros(sum(splits_out))
    dist.all_to_all_single(got, x, splits_out, splits_in, group=g)
    chk.exact(f"{tag} alltoall uneven splits", got, want)


CHECKS = {
    "alltoall": _check_alltoall,
    "allreduce": _check_allreduce,
    "reduce_scatter": _check_reduce_scatter,
    "reduce": _check_reduce,
    "allgather": _check_allgather,
    "broadcast": _check_broadcast,
}


def forced_arms_vs_gloo(rank, world):
    import dynamiccl_pg.backend as backend

    gloo = dist.new_group(backend="gloo")
    chk = Checker()
    for forced in FORCE_SETS:
        os.environ["DYNAMICCL_FORCE"] = ";".join(f"{op}:{arm}" for op, arm in forced.items())
        g = dist.new_group(backend="dynamiccl")
        for op, arm in forced.items():
            CHECKS[op](rank, world, g, gloo, chk, f"[{op}:{arm}]")
        # The decision log must show the forced arm, and only it, for every forced op.
        pg = backend.backend_of(g)
        log = pg.decision_log()
        from dynamiccl_pg import _C
        for op, arm in forced.items():
            want = pg.arms(_C.Engine.cpu, op).index(arm)
            arms = {(a, is_forced) for (_, o, _, _, a, _, engine, _, is_forced) in log
                    if o == op and engine == "cpu"}
            if arms != {(want, True)}:
                chk.failures.append(f"[{op}:{arm}] decision log shows (arm, forced) {arms}, "
                                    f"expected {{({want}, True)}}")
        dist.destroy_process_group(g)
    os.environ.pop("DYNAMICCL_FORCE", None)
    return chk.checked, chk.failures


@pytest.mark.parametrize("world", [2, 3, 4, 5, 6, 7, 8])
def test_forced_arms_match_gloo(world):
    results = run_ranks(forced_arms_vs_gloo, world, timeout=600)
    failures = [f"rank {r}: {f}" for r, (_, fs) in enumerate(results) for f in fs]
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:40])
    assert all(checked > 500 for checked, _ in results)


def test_force_sets_cover_every_arm():
    from dynamiccl_pg import _C
    for op, names in ARM_NAMES.items():
        assert _C.arm_names(_C.Engine.cpu, op) == names
        forced = {f[op] for f in FORCE_SETS if op in f}
        assert forced == set(names[1:]), f"{op}: arms not forced by any test set"
    for op in ("gather", "scatter", "send", "recv", "barrier"):
        assert _C.arm_names(_C.Engine.cpu, op) == ["default"]


def _noop(rank, world):
    return rank


def test_unknown_forced_arm_fails_with_valid_names():
    errors = run_ranks(_noop, 2, env={"DYNAMICCL_FORCE": "allreduce:ring_s5"},
                       expect_failure=True, timeout=120)
    for err in errors:
        assert isinstance(err, str) and "ring_s5" in err and "ring_s4" in err, err


def _absent_peer(rank, world):
    os.environ["DYNAMICCL_FORCE"] = "allreduce:ring"
    g = dist.new_group(backend="dynamiccl", timeout=timedelta(seconds=2))
    t = torch.ones(1000)
    dist.all_reduce(t, group=g)
    if rank == 1:  # alive, but never joins the second all-reduce
        time.sleep(6)
        return "absent"
    try:
        dist.all_reduce(t, group=g)
    except Exception as e:  # the schedule's waits time out instead of hanging
        return f"{type(e).__name__}: {e}"
    return "no error"


def test_absent_peer_raises_instead_of_hanging():
    res = run_ranks(_absent_peer, 2, timeout=120)
    assert res[1] == "absent"
    # Gloo's class (RuntimeError: test_faults.py compares them), naming the schedule.
    assert res[0].startswith("RuntimeError") and "allreduce (ring" in res[0], res[0]
    assert "Timed out" in res[0], res[0]


def _many_in_flight(rank, world):
    """Async calls left in flight together on our schedules (which run two at a time): calls on
    disjoint tensors all complete correctly, and calls on one storage (the tensor and a view of
    it) act in issue order."""
    os.environ["DYNAMICCL_FORCE"] = "allreduce:rd;broadcast:tree"
    g = dist.new_group(backend="dynamiccl")
    os.environ.pop("DYNAMICCL_FORCE")
    failures = []
    n = 1 << 19  # 4 MiB: long enough that the small buckets around it finish while it runs
    for trial in range(5):
        same = torch.full((n,), float(rank + 1), dtype=torch.float64)
        buckets = [torch.full((30 + 7 * i,), float(rank + i)) for i in range(6)]
        works = [dist.broadcast(same, src=world - 1, group=g, async_op=True)]  # all = world
        works.append(dist.all_reduce(buckets[0], group=g, async_op=True))
        works.append(dist.all_reduce(same, group=g, async_op=True))            # all = world^2
        works += [dist.all_reduce(b, group=g, async_op=True) for b in buckets[1:3]]
        works.append(dist.all_reduce(same[:10], group=g, async_op=True))       # head = world^3
        works += [dist.all_reduce(b, group=g, async_op=True) for b in buckets[3:]]
        for w in works:
            w.wait()
        want = torch.full((n,), float(world ** 2), dtype=torch.float64)
        want[:10] = world ** 3
        if not torch.equal(same, want):
            failures.append(f"trial {trial}: same-storage calls out of order: head "
                            f"{same[0].item()}, tail {same[-1].item()}")
        for i, b in enumerate(buckets):
            if not torch.equal(b, torch.full_like(b, world * i + world * (world - 1) / 2)):
                failures.append(f"trial {trial}: bucket {i} wrong: {b[0].item()}")
    return failures


@pytest.mark.parametrize("world", [3, 4])
def test_calls_in_flight_together_complete_correctly_and_in_order_per_tensor(world):
    results = run_ranks(_many_in_flight, world, timeout=300)
    failures = [f"rank {r}: {f}" for r, fs in enumerate(results) for f in fs]
    assert not failures, "\n".join(failures[:20])
