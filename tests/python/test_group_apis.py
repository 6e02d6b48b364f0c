"""Every torch.distributed API that makes groups, on dynamiccl as on gloo (4 real ranks): the
same results, and the children are dynamiccl groups with their own learners and roles.

split_group goes through our Backend::split (torch 2.11-2.14 split only from a default group bound
to a device, and refuse otherwise for gloo as for us: the test then compares the refusals);
new_subgroups, new_group with local synchronization and DeviceMesh (with _flatten where this
torch has it) through the creator.
"""

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(300)


def _reduced(rank, group):
    t = torch.arange(4, dtype=torch.float32) + rank
    dist.all_reduce(t, group=group)
    return t.tolist()


def _backend_facts(group):
    b = group._get_backend(torch.device("cpu"))
    return type(b).__name__, getattr(b, "group_role", None)


def every_group_api(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    out = {}
    try:  # (torch 2.11-2.14 split only a default group bound to a device: gloo refuses too)
        child = dist.split_group(split_ranks=[[0, 1], [2, 3]], group_desc="mesh_tp")
        out["split_group"] = (_reduced(rank, child), dist.get_process_group_ranks(child),
                              _backend_facts(child))
        out["split_twice"] = _reduced(rank, dist.split_group(child, split_ranks=[[0], [1]]))
    except (AttributeError, RuntimeError) as e:
        out["split_refused"] = f"{type(e).__name__}: {e}"
    mine, _ = dist.new_subgroups(2)
    out["new_subgroups"] = (_reduced(rank, mine), _backend_facts(mine))
    local = dist.new_group([0, 1] if rank < 2 else [2, 3], use_local_synchronization=True)
    out["local_sync"] = _reduced(rank, local)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    out["mesh_tp"] = (_reduced(rank, mesh.get_group("tp")), _backend_facts(mesh.get_group("tp")))
    out["mesh_dp"] = _reduced(rank, mesh.get_group("dp"))
    if hasattr(mesh, "_flatten"):
        out["mesh_flatten"] = _reduced(rank, mesh._flatten().get_group())
    return out


def test_group_apis_match_gloo():
    gloo = run_ranks(every_group_api, 4, backend="gloo")
    ours = run_ranks(every_group_api, 4)
    for rank, (g, o) in enumerate(zip(gloo, ours)):
        assert set(o) == set(g), rank
        for api in g:
            if api in ("split_group", "new_subgroups", "mesh_tp"):
                assert o[api][0] == g[api][0], (rank, api)
                assert o[api][-1][0] == "ProcessGroupDynamicCCL", (rank, api, o[api])
            else:
                assert o[api] == g[api], (rank, api)
        if "split_group" in o:
            assert o["split_group"][1] == g["split_group"][1]  # the same members
            assert o["split_group"][2][1] == "tp", o["split_group"]  # role from its description
        assert o["mesh_tp"][-1][1] == "tp", o["mesh_tp"]


def split_learns_on_its_own(rank, world):
    """A split child learns on its own: its learner has states, the parent's has none."""
    import dynamiccl_pg
    try:
        child = dist.split_group(split_ranks=[[0, 1], [2, 3]])
    except RuntimeError as e:
        return str(e)
    for _ in range(64):
        dist.all_reduce(torch.ones(1024), group=child)
    return (len(dynamiccl_pg.stats(child)["states"]["cpu"]),
            len(dynamiccl_pg.stats()["states"]["cpu"]), dynamiccl_pg.decision_hash(child))


def test_split_child_has_its_own_learner():
    results = run_ranks(split_learns_on_its_own, 4)
    if isinstance(results[0], str):
        pytest.skip(f"this torch splits no group on a default group without a device: {results[0]}")
    for child_states, parent_states, _ in results:
        assert child_states >= 1 and parent_states == 0, results
    assert results[0][2] == results[1][2] and results[2][2] == results[3][2]


def test_torchcomms_mode_leaves_dynamiccl_on_the_process_group_path():
    """TORCH_DISTRIBUTED_USE_TORCHCOMMS=1: torch routes only the backends torchcomms owns through
    it; a c10d plugin such as ours stays on the ProcessGroup path (and without the torchcomms
    package the switch does nothing). Every group API still works, with gloo's results."""
    env = {"TORCH_DISTRIBUTED_USE_TORCHCOMMS": "1"}
    gloo = run_ranks(every_group_api, 4, backend="gloo", env=env)
    ours = run_ranks(every_group_api, 4, env=env)
    for g, o in zip(gloo, ours):
        assert o["local_sync"] == g["local_sync"] and o["mesh_dp"] == g["mesh_dp"]
        assert o["new_subgroups"][0] == g["new_subgroups"][0]
