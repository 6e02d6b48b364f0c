"""Every collective of the c10d surface on "dynamiccl", compared with the same call on plain Gloo
in the same run, over dtypes and reduce ops, sync and async, at 2, 3 and 4 ranks.

`mode=off` must be exact (pass-through). `mode=learn` probes our CPU schedules, whose float
summation order may differ: integers stay exact, floats within summation-order tolerance.
"""

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(600)

R = dist.ReduceOp
FLOAT_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INT_DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64]


def _value(rank, n, dtype, seed):
    """Deterministic per-rank data; small integers so PRODUCT and int8 do not overflow."""
    g = torch.Generator().manual_seed(seed * 131 + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point:
        return (torch.rand(n, generator=g) * 2 + 0.5).to(dtype)
    return torch.randint(1, 4, (n,), generator=g).to(dtype)


class Checker:
    def __init__(self, exact):
        self.exact = exact
        self.failures = []
        self.checked = 0

    def same(self, name, got, want):
        self.checked += 1
        if got.dtype != want.dtype or got.shape != want.shape:
            self.failures.append(f"{name}: dtype/shape {got.dtype}{tuple(got.shape)} vs "
                                 f"{want.dtype}{tuple(want.shape)}")
            return
        if self.exact or not got.dtype.is_floating_point:
            ok = torch.equal(got, want)
        else:
            tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(got.dtype, 1e-5)
            ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
        if not ok:
            self.failures.append(f"{name}: got {got.flatten()[:6].tolist()} want "
                                 f"{want.flatten()[:6].tolist()}")


def _reduce_cases():
    for dtype in FLOAT_DTYPES:
        for op in (R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX, "premul"):
            yield dtype, op
    for dtype in INT_DTYPES:
        for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR):
            yield dtype, op
    for op in (R.MIN, R.MAX, R.BAND, R.BOR):
        yield torch.bool, op


def _gloo_reference_reduce(t, op, gloo, n):
    """What the op means, computed with Gloo's ops (Gloo has no AVG / PREMUL_SUM)."""
    if op is R.AVG:
        dist.all_reduce(t, R.SUM, group=gloo)
        return t.div_(n) if t.dtype.is_floating_point else t.div_(n, rounding_mode="trunc")
    if op == "premul":
        dist.all_reduce(t, R.SUM, group=gloo)
        return t.mul_(0.5)
    dist.all_reduce(t, op, group=gloo)
    return t


def _op(op):
    return dist._make_nccl_premul_sum(0.5) if op == "premul" else op


def collectives_vs_gloo(rank, world, exact, sizes):
    gloo = dist.new_group(backend="gloo")
    chk = Checker(exact)
    seed = 0
    for n in sizes:
        for dtype, op in _reduce_cases():
            seed += 1
            if dtype in (torch.float16, torch.bfloat16) and op is R.PRODUCT:
                continue  # gloo has no PRODUCT kernel for these
            for async_op in (False, True):
                got, want = _value(rank, n, dtype, seed), _value(rank, n, dtype, seed)
                work = dist.all_reduce(got, _op(op), async_op=async_op)
                if async_op:
                    work.wait()
                _gloo_reference_reduce(want, op, gloo, world)
                chk.same(f"all_reduce n={n} {dtype} {op} async={async_op}", got, want)
            if op in (R.SUM, R.MAX) or (op is R.AVG and dtype == torch.float32):
                for root in range(world):
                    got, want = _value(rank, n, dtype, seed), _value(rank, n, dtype, seed)
                    dist.reduce(got, root, _op(op))
                    if op is R.AVG:
                        dist.reduce(want, root, R.SUM, group=gloo)
                        want.div_(world)
                    else:
                        dist.reduce(want, root, op, group=gloo)
                    if rank == root:
                        chk.same(f"reduce n={n} {dtype} {op} root={root}", got, want)
            if op in (R.SUM, R.MIN, R.AVG, "premul") and dtype != torch.bool:
                chunks = [_value(rank + 10 * i, n, dtype, seed) for i in range(world)]
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter(out, [c.clone() for c in chunks], _op(op))
                ref = torch.empty(n, dtype=dtype)
                base_op = R.SUM if op in (R.AVG, "premul") else op
                dist.reduce_scatter(ref, [c.clone() for c in chunks], base_op, group=gloo)
                if op is R.AVG:
                    ref = ref.div_(world) if dtype.is_floating_point else ref.div_(
                        world, rounding_mode="trunc")
                elif op == "premul":
                    ref.mul_(0.5)
                chk.same(f"reduce_scatter n={n} {dtype} {op}", out, ref)
                flat = torch.cat(chunks)
                out2 = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out2, flat.clone(), _op(op))
                chk.same(f"reduce_scatter_tensor n={n} {dtype} {op}", out2, ref)
        for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.uint8, torch.bool):
            seed += 1
            x = _value(rank, n, dtype, seed)
            for root in range(world):
                got = x.clone() if rank == root else torch.zeros_like(x)
                want = x.clone() if rank == root else torch.zeros_like(x)
                dist.broadcast(got, root)
                dist.broadcast(want, root, group=gloo)
                chk.same(f"broadcast n={n} {dtype} root={root}", got, want)
            outs = [torch.zeros_like(x) for _ in range(world)]
            refs = [torch.zeros_like(x) for _ in range(world)]
            dist.all_gather(outs, x)
            dist.all_gather(refs, x, group=gloo)
            for i in range(world):
                chk.same(f"all_gather n={n} {dtype} [{i}]", outs[i], refs[i])
            flat = torch.zeros(n * world, dtype=dtype)
            dist.all_gather_into_tensor(flat, x)
            chk.same(f"all_gather_into_tensor n={n} {dtype}", flat, torch.cat(refs))
            work = dist.all_gather_into_tensor(flat, x, async_op=True)
            work.wait()
            chk.same(f"all_gather_into_tensor async n={n} {dtype}", flat, torch.cat(refs))
    return chk.failures, chk.checked


@pytest.mark.parametrize("world,mode", [(2, "off"), (2, "learn"), (4, "learn"), (3, "learn")])
def test_collectives_match_gloo(world, mode):
    # Sizes that do not divide evenly, smaller than the world, and zero.
    sizes = [0, 1, 5, 1001, 40000] if world != 4 else [3, 4099]
    results = run_ranks(collectives_vs_gloo, world, mode == "off", sizes,
                        env={"DYNAMICCL_MODE": mode, "DYNAMICCL_ROUND_CALLS": "8"})
    for rank, (failures, checked) in enumerate(results):
        assert checked > 100
        assert not failures, f"rank {rank}: " + "\n".join(failures[:20])


def other_collectives(rank, world):
    """Gather/scatter, all-to-all, p2p, barrier, object collectives, subgroups, coalescing."""
    out = {}
    # gather / scatter
    x = torch.full((3,), float(rank))
    gathered = [torch.zeros(3) for _ in range(world)] if rank == 0 else None
    dist.gather(x, gathered, dst=0)
    if rank == 0:
        out["gather"] = [g[0].item() for g in gathered]
    recv = torch.zeros(2)
    dist.scatter(recv, [torch.full((2,), float(i * 10)) for i in range(world)] if rank == 1
                 else None, src=1)
    out["scatter"] = recv.tolist()
    # all-to-all (list and single, with uneven splits)
    ins = [torch.full((i + 1,), float(rank * 100 + i)) for i in range(world)]
    outs = [torch.zeros(rank + 1) for _ in range(world)]
    dist.all_to_all(outs, ins)
    out["all_to_all"] = [o.tolist() for o in outs]
    in_splits = [i + 1 for i in range(world)]
    out_splits = [rank + 1] * world
    single_in = torch.cat(ins)
    single_out = torch.zeros(sum(out_splits))
    dist.all_to_all_single(single_out, single_in, out_splits, in_splits)
    out["all_to_all_single"] = single_out.tolist()
    # p2p: ring exchange, blocking and non-blocking, and batch_isend_irecv
    right, left = (rank + 1) % world, (rank - 1) % world
    buf = torch.zeros(4)
    if rank % 2 == 0:
        dist.send(torch.full((4,), float(rank)), right)
        dist.recv(buf, left)
    else:
        dist.recv(buf, left)
        dist.send(torch.full((4,), float(rank)), right)
    out["send_recv"] = buf[0].item()
    buf2 = torch.zeros(4)
    reqs = [dist.isend(torch.full((4,), float(rank) + 0.5), right), dist.irecv(buf2, left)]
    for r in reqs:
        r.wait()
    out["isend_irecv"] = buf2[0].item()
    buf3 = torch.zeros(5)
    ops = [dist.P2POp(dist.isend, torch.full((5,), float(rank) + 0.25), right),
           dist.P2POp(dist.irecv, buf3, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    out["batch_isend_irecv"] = buf3[0].item()
    # receive from any source
    if rank == 0:
        anybuf = torch.zeros(1)
        srcs = set()
        for _ in range(world - 1):
            srcs.add(dist.recv(anybuf))
        out["recv_any"] = sorted(srcs)
    else:
        dist.send(torch.ones(1) * rank, 0)
    dist.barrier()
    # object collectives
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    out["all_gather_object"] = [o["rank"] for o in objs]
    lst = [f"hello{rank}"] if rank == 0 else [None]
    dist.broadcast_object_list(lst, src=0)
    out["broadcast_object_list"] = lst[0]
    # subgroup with a description; coalescing manager
    sub = dist.new_group([0, 1], group_desc="TENSOR_MODEL_PARALLEL_GROUP")
    if rank < 2:
        t = torch.ones(3) * (rank + 1)
        dist.all_reduce(t, group=sub)
        out["subgroup"] = t[0].item()
        import dynamiccl_pg
        out["subgroup_role"] = dynamiccl_pg.backend.backend_of(sub).group_role
    ts = [torch.ones(2) * rank, torch.ones(3) * rank]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    out["coalesced"] = [t[0].item() for t in ts]
    flat_outs = [torch.zeros(2 * world), torch.zeros(3 * world)]
    with dist._coalescing_manager():
        for o, t in zip(flat_outs, [torch.ones(2) * rank, torch.ones(3) * rank]):
            dist.all_gather_into_tensor(o, t)
    out["coalesced_all_gather"] = [o.tolist() for o in flat_outs]
    out["seq"] = dist.distributed_c10d._get_default_group()._get_backend(
        torch.device("cpu"))._get_sequence_number_for_group()
    return out


@pytest.mark.parametrize("mode", ["learn", "off"])
def test_other_collectives(mode):
    world = 3
    res = run_ranks(other_collectives, world, env={"DYNAMICCL_MODE": mode})
    total = sum(range(world))
    for rank, out in enumerate(res):
        if rank == 0:
            assert out["gather"] == [0.0, 1.0, 2.0]
            assert out["recv_any"] == [1, 2]
        assert out["scatter"] == [rank * 10.0] * 2
        assert out["all_to_all"] == [[src * 100.0 + rank] * (rank + 1) for src in range(world)]
        assert out["all_to_all_single"] == [src * 100.0 + rank for src in range(world)
                                            for _ in range(rank + 1)]
        left = (rank - 1) % world
        assert out["send_recv"] == left
        assert out["isend_irecv"] == left + 0.5
        assert out["batch_isend_irecv"] == left + 0.25
        assert out["all_gather_object"] == list(range(world))
        assert out["broadcast_object_list"] == "hello0"
        if rank < 2:
            assert out["subgroup"] == 3.0
            assert out["subgroup_role"] == "tp"
        assert out["coalesced"] == [float(total)] * 2
        assert out["coalesced_all_gather"] == [
            [float(r) for r in range(world) for _ in range(k)] for k in (2, 3)]
        assert out["seq"] > 10


# The name torch gives each dtype in its messages ("... the desired output type Int").
_DTYPE_NAMES = {torch.int32: "Int", torch.int64: "Long", torch.uint8: "Byte"}


def integer_avg(rank, world):
    """AVG of integer tensors on every reducing collective, sync and async: where it fails (the
    call or wait()), the exception's class and message. A result instead of an error is kept."""
    n = 64
    calls = {
        "all_reduce": lambda x, a: dist.all_reduce(x, op=R.AVG, async_op=a),
        "reduce": lambda x, a: dist.reduce(x, 0, op=R.AVG, async_op=a),
        "reduce_scatter_tensor": lambda x, a: dist.reduce_scatter_tensor(
            x[:n // world], x, op=R.AVG, async_op=a),
        "reduce_scatter": lambda x, a: dist.reduce_scatter(
            x[:n // world], list(x.chunk(world)), op=R.AVG, async_op=a),
    }
    outcomes = {}
    for dtype in _DTYPE_NAMES:
        for name, call in calls.items():
            for async_op in (False, True):
                x = torch.full((n,), rank + 2, dtype=dtype)
                where = "call"
                try:
                    work = call(x, async_op)
                    where = "wait"
                    if async_op:
                        work.wait()
                    outcome = ("no error", x.tolist())
                except Exception as e:  # the class is what is compared
                    outcome = (where, type(e).__name__, str(e).splitlines()[0])
                outcomes[(str(dtype), name, async_op)] = outcome
    t = torch.ones(3)
    dist.all_reduce(t)  # the group is still usable, in step on every rank
    outcomes["after"] = t.tolist()
    return outcomes


@pytest.fixture(scope="module")
def gloo_integer_avg():
    return run_ranks(integer_avg, 2, backend="gloo")


@pytest.mark.parametrize("mode,force", [
    ("off", ""),
    ("learn", ""),
    ("learn", "allreduce:ring;reduce:tree;reduce_scatter:ring"),
    ("learn", "allreduce:rd;reduce:ring_s8;reduce_scatter:rd"),
])
def test_integer_avg_fails_as_on_gloo(gloo_integer_avg, mode, force):
    """Gloo refuses AVG of an integer tensor (the mean is not an integer): dynamiccl passes the
    same error through, on the native path and on our schedules, and an async call raises it
    from wait(), never handing back a truncated mean."""
    ours = run_ranks(integer_avg, 2, env={"DYNAMICCL_MODE": mode, "DYNAMICCL_FORCE": force})
    for rank, (got, want) in enumerate(zip(ours, gloo_integer_avg)):
        assert got.keys() == want.keys()
        assert got["after"] == want["after"] == [2.0, 2.0, 2.0]
        for key, expected in want.items():
            if key == "after":
                continue
            dtype, _, async_op = key
            assert expected[0] == ("wait" if async_op else "call"), (key, expected)
            assert got[key][:2] == expected[:2], (rank, key, got[key], expected)
            assert _DTYPE_NAMES[getattr(torch, dtype.split(".")[1])] in got[key][2], got[key]
