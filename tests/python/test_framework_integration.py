"""Framework integration on real processes: FSDP2, DeviceMesh and Megatron-style groups on
"dynamiccl" (CPU engine), checked against Gloo, and the roles the backend gives their traffic.
(torch.distributed.pipelining: test_pipelining.py.)
"""

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(300)

WORLD = 4
FSDP_STEPS = 3


def _role_id(name):
    from dynamiccl_pg import config
    return config.ROLES.index(name)


# --------------------------------------------------------------------------------------------
# (a) FSDP2


class _SpyAllGather:
    """A user's custom FSDP all-gather: records the hint in scope when FSDP calls it."""

    def __init__(self):
        self.hints = []

    def allocate(self, size, *, dtype, device):
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, async_op=False):
        from dynamiccl_pg import _C
        self.hints.append(_C.get_hint())
        return dist.all_gather_into_tensor(output_tensor, input_tensor, group=group,
                                           async_op=async_op)


class _SpyReduceScatter(_SpyAllGather):
    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        from dynamiccl_pg import _C
        self.hints.append((_C.get_hint(), op == dist.ReduceOp.PREMUL_SUM))
        return dist.reduce_scatter_tensor(output_tensor, input_tensor, op=op, group=group,
                                          async_op=async_op)


def _fsdp_model(mesh, divide_factor=None):
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 64),
                                torch.nn.GELU(), torch.nn.Linear(64, 4))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
            if divide_factor is not None:
                layer.set_gradient_divide_factor(divide_factor)
    fully_shard(model, mesh=mesh)
    return model


def fsdp_vs_gloo(rank, world, steps):
    """Five identical FSDP2 models trained side by side on different groups of one job."""
    import dynamiccl_pg
    import dynamiccl_pg.fsdp
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

    def mesh_of(group):
        return DeviceMesh.from_group(group, "cpu")

    gloo = dist.new_group(backend="gloo")
    # Our CPU schedules pinned, so FSDP's AVG and PREMUL_SUM run through them for sure.
    forced = dist.new_group(backend="dynamiccl", pg_options=dynamiccl_pg.Options(
        force="allgather:ring;reduce_scatter:rd"))
    # A shard group whose description says "context parallel": annotate pins the FSDP heads.
    cp_like = dist.new_group(backend="dynamiccl", group_desc="mesh_cp")
    factor = 2.0 * world  # != group size: FSDP reduces with PREMUL_SUM(1/factor)
    models = {
        "gloo": (_fsdp_model(mesh_of(gloo)), 0.1),
        "gloo_half_lr": (_fsdp_model(mesh_of(gloo)), 0.05),
        "dynamiccl": (_fsdp_model(init_device_mesh("cpu", (world,))), 0.1),
        "forced": (_fsdp_model(mesh_of(forced)), 0.1),
        "premul_annotated": (_fsdp_model(mesh_of(cp_like), divide_factor=factor), 0.1),
    }
    spies = {}
    annotated = models["premul_annotated"][0]
    for i, layer in enumerate(m for m in annotated if isinstance(m, torch.nn.Linear)):
        spies[i] = (_SpyAllGather(), _SpyReduceScatter())
        layer.set_custom_all_gather(spies[i][0])
        layer.set_custom_reduce_scatter(spies[i][1])
    units = dynamiccl_pg.fsdp.annotate(annotated)

    optims = {k: torch.optim.SGD(m.parameters(), lr=lr) for k, (m, lr) in models.items()}
    data = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x, y = torch.randn(8, 16, generator=data), torch.randn(8, 4, generator=data)
        for name, (model, _) in models.items():
            torch.nn.functional.mse_loss(model(x), y).backward()
            optims[name].step()
            optims[name].zero_grad()
    hint_after = dynamiccl_pg._C.get_hint()
    roles = {name: sorted({(s["role"], s["op"]) for s in dynamiccl_pg.stats(g)["states"]["cpu"]})
             for name, g in (("world", None), ("cp_like", cp_like))}
    group_roles = {"cp_like": dynamiccl_pg.backend.backend_of(cp_like).group_role}
    forced_pg = dynamiccl_pg.backend.backend_of(forced)
    forced_arms = sorted({(e[1], forced_pg.arms(dynamiccl_pg._C.Engine.cpu, e[1])[e[4]])
                          for e in dynamiccl_pg.decision_log(forced) if e[8]})
    params = {name: [p.full_tensor().tolist() for p in model.parameters()]
              for name, (model, _) in models.items()}
    return {"params": params, "roles": roles, "group_roles": group_roles, "units": units,
            "forced_arms": forced_arms,
            "spies": {i: (ag.hints, rs.hints) for i, (ag, rs) in spies.items()},
            "hint_after": hint_after}


def _assert_params_close(got, want, what):
    # Tensors travel back from the ranks as lists: shared-memory tensors would not outlive them.
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = torch.tensor(g), torch.tensor(w)
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-6), \
            f"{what}: parameter {i} differs by {(g - w).abs().max().item():.3g}"


@pytest.fixture(scope="module")
def fsdp_results():
    return run_ranks(fsdp_vs_gloo, WORLD, FSDP_STEPS, timeout=240)


def test_fsdp2_training_matches_gloo(fsdp_results):
    for rank, r in enumerate(fsdp_results):
        p = r["params"]
        assert r["forced_arms"] == [("allgather", "ring"), ("reduce_scatter", "rd")]
        _assert_params_close(p["dynamiccl"], p["gloo"], f"rank {rank} dynamiccl (AVG) vs gloo")
        _assert_params_close(p["forced"], p["gloo"],
                             f"rank {rank} dynamiccl with ring/rd schedules vs gloo")
        # PREMUL_SUM(1/(2n)) halves the AVG gradient: same as Gloo's AVG at half the rate.
        _assert_params_close(p["premul_annotated"], p["gloo_half_lr"],
                             f"rank {rank} dynamiccl PREMUL_SUM vs gloo")
        assert not torch.allclose(torch.tensor(p["gloo"][0]), torch.tensor(p["gloo_half_lr"][0])), \
            "the steps had no effect"


def test_fsdp2_roles_from_op_and_from_annotate(fsdp_results):
    r = fsdp_results[0]
    # World group (role default): the op alone makes all-gather fsdp_ag and reduce-scatter fsdp_rs.
    assert ("fsdp_ag", "allgather") in r["roles"]["world"]
    assert ("fsdp_rs", "reduce_scatter") in r["roles"]["world"]
    # A group described as context parallel keeps role cp; annotate pins FSDP's heads anyway.
    assert r["group_roles"]["cp_like"] == "cp"
    assert {role for role, _ in r["roles"]["cp_like"]} == {"fsdp_ag", "fsdp_rs"}


def test_fsdp2_annotate_hints_wrap_user_comms(fsdp_results):
    ag_role, rs_role = _role_id("fsdp_ag"), _role_id("fsdp_rs")
    for r in fsdp_results:
        assert r["units"] == 3
        assert r["hint_after"] == (-1,) * 6, "the hint leaked out of the collective"
        for unit, (ag_hints, rs_hints) in r["spies"].items():
            # (role, bucket, is_last, stage, direction, priority); the user's comm still runs.
            assert len(rs_hints) == FSDP_STEPS
            assert {h[:4] for h in ag_hints} == {(ag_role, unit, -1, -1)}
            # Per step: unshard before forward, and again inside backward (non-root units
            # reshard after forward by default).
            assert [h[4] for h in ag_hints] == [0, 1] * FSDP_STEPS
            # FSDP's own reduce op (PREMUL_SUM for a custom divide factor) reaches the comm.
            assert {(h[:5], premul) for h, premul in rs_hints} == {((rs_role, unit, -1, -1, 1),
                                                                    True)}


# --------------------------------------------------------------------------------------------
# (b) DeviceMesh and (c) Megatron-style groups: one job, two tests


def mesh_and_megatron_roles(rank, world):
    import dynamiccl_pg
    from dynamiccl_pg.backend import backend_of
    from torch.distributed.device_mesh import init_device_mesh

    def described(group):
        b = backend_of(group)
        return b.group_desc, b.group_role

    out = {"mesh": {}, "hsdp": {}, "megatron": {}, "calls": {}}
    mesh = init_device_mesh("cpu", (1, 2, 2), mesh_dim_names=("pp", "dp", "tp"))
    for dim in ("pp", "dp", "tp"):
        out["mesh"][dim] = described(mesh.get_group(dim))
    hsdp = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp_replicate", "dp_shard"))
    for dim in ("dp_replicate", "dp_shard"):
        out["hsdp"][dim] = described(hsdp.get_group(dim))

    # Megatron's parallel_state: every rank creates every group of a kind, keeps its own.
    def megatron_groups(desc, partitions):
        mine = None
        for ranks in partitions:
            g = dist.new_group(ranks, group_desc=desc)
            if rank in ranks:
                mine = g
        return mine

    kinds = {
        "TENSOR_MODEL_PARALLEL_GROUP": [[0, 1], [2, 3]],
        "PIPELINE_MODEL_PARALLEL_GROUP": [[0, 2], [1, 3]],
        "DATA_PARALLEL_GROUP": [[0, 2], [1, 3]],
        "CONTEXT_PARALLEL_GROUP": [[0], [1], [2], [3]],
        "EXPERT_MODEL_PARALLEL_GROUP": [[0, 1, 2, 3]],
        "my_embedding_sync": [[0, 3]] + [[r] for r in (1, 2)],  # custom: DYNAMICCL_ROLE_MAP
        "my_unmapped_group": [[0, 1, 2, 3]],
    }
    groups = {desc: megatron_groups(desc, parts) for desc, parts in kinds.items()}
    for desc, g in groups.items():
        out["megatron"][desc] = described(g)

    # Per call: the op refines a group's role (all-gather on a dp group is FSDP's).
    t = torch.ones(64)
    dist.all_reduce(t, group=mesh.get_group("tp"))
    dist.all_reduce(t, group=mesh.get_group("dp"))
    gathered = torch.empty(64 * 2)
    dist.all_gather_into_tensor(gathered, t, group=mesh.get_group("dp"))
    dist.all_reduce(t, group=groups["TENSOR_MODEL_PARALLEL_GROUP"])
    for name, g in (("mesh_tp", mesh.get_group("tp")), ("mesh_dp", mesh.get_group("dp")),
                    ("megatron_tp", groups["TENSOR_MODEL_PARALLEL_GROUP"])):
        out["calls"][name] = sorted({(s["role"], s["op"])
                                     for s in dynamiccl_pg.stats(g)["states"]["cpu"]})
    return out


@pytest.fixture(scope="module")
def role_results():
    env = {"DYNAMICCL_ROLE_MAP": "my_embedding_sync=dp;CONTEXT_PARALLEL_GROUP=ep"}
    return run_ranks(mesh_and_megatron_roles, WORLD, timeout=240, env=env)


def test_device_mesh_dims_resolve_to_roles(role_results):
    for r in role_results:
        assert r["mesh"] == {"pp": ("mesh_pp", "pp"), "dp": ("mesh_dp", "dp"),
                             "tp": ("mesh_tp", "tp")}
        assert r["hsdp"] == {"dp_replicate": ("mesh_dp_replicate", "dp"),
                             "dp_shard": ("mesh_dp_shard", "dp")}
        assert r["calls"]["mesh_tp"] == [("tp", "allreduce")]
        assert r["calls"]["mesh_dp"] == [("dp", "allreduce"), ("fsdp_ag", "allgather")]


def test_megatron_group_desc_and_role_map(role_results):
    for r in role_results:
        m = {desc: role for desc, (_, role) in r["megatron"].items()}
        assert m["TENSOR_MODEL_PARALLEL_GROUP"] == "tp"
        assert m["PIPELINE_MODEL_PARALLEL_GROUP"] == "pp"
        assert m["DATA_PARALLEL_GROUP"] == "dp"
        assert m["EXPERT_MODEL_PARALLEL_GROUP"] == "ep"
        # DYNAMICCL_ROLE_MAP: a custom description gets its role, and an exact entry wins over
        # the built-in Megatron rule (CONTEXT_PARALLEL_GROUP would be cp).
        assert m["my_embedding_sync"] == "dp"
        assert m["CONTEXT_PARALLEL_GROUP"] == "ep"
        assert m["my_unmapped_group"] == "default"
        assert r["calls"]["megatron_tp"] == [("tp", "allreduce")]
