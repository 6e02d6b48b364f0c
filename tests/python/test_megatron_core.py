"""Megatron-Core's own parallel_state on "dynamiccl" CPU ranks (optional: skipped without the
megatron-core package): the groups `initialize_model_parallel` creates get their roles from
Megatron's group descriptions, and all-reduces on its tensor- and data-parallel groups are
learned under the tp and dp heads, identically on every rank.

Only parallel_state is exercised: Megatron's tensor-parallel layers and mappings call
`torch.cuda.current_device()` and need GPUs."""

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

megatron_core = pytest.importorskip("megatron.core", reason="megatron-core is not installed")
pytestmark = pytest.mark.timeout(600)


def parallel_state_roles(rank, world, calls):
    import dynamiccl_pg
    from dynamiccl_pg.backend import backend_of
    from megatron.core import parallel_state as ps

    def groups():
        return {"tp": ps.get_tensor_model_parallel_group(),
                "pp": ps.get_pipeline_model_parallel_group(),
                "dp": ps.get_data_parallel_group(),
                "cp": ps.get_context_parallel_group(),
                "ep": ps.get_expert_model_parallel_group()}

    # tp 2 x pp 2: every kind of group Megatron makes, and the role each gets.
    ps.initialize_model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
                                 create_gloo_process_groups=False)
    roles = {name: backend_of(g).group_role for name, g in groups().items()}
    ps.destroy_model_parallel()
    # tp 2 x dp 2: all-reduces on the tensor- and data-parallel groups.
    ps.initialize_model_parallel(tensor_model_parallel_size=2, create_gloo_process_groups=False)
    learning = {name: g for name, g in groups().items() if name in ("tp", "dp")}
    right = True
    for g in learning.values():
        members = dist.get_process_group_ranks(g)
        for _ in range(calls):
            t = torch.full((4096,), float(rank))
            dist.all_reduce(t, group=g)
            right &= bool(torch.all(t == sum(members)))
    learned = {name: sorted({(s["role"], s["op"]) for s in dynamiccl_pg.stats(g)["states"]["cpu"]
                             if s["calls"] >= calls})
               for name, g in learning.items()}
    hashes = {name: (tuple(dist.get_process_group_ranks(g)), dynamiccl_pg.decision_hash(g))
              for name, g in learning.items()}
    ps.destroy_model_parallel()
    return roles, right, learned, hashes


def test_megatron_parallel_state_groups_get_their_roles_and_are_learned():
    results = run_ranks(parallel_state_roles, 4, 100, timeout=300)
    for roles, right, learned, _ in results:
        assert roles == {"tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep"}, roles
        assert right
        assert learned == {"tp": [("tp", "allreduce")], "dp": [("dp", "allreduce")]}, learned
    # The members of each group decided alike.
    for name in ("tp", "dp"):
        per_group = {}
        for _, _, _, hashes in results:
            members, h = hashes[name]
            assert len(members) == 2
            per_group.setdefault(members, set()).add(h)
        assert len(per_group) == 2 and all(len(h) == 1 for h in per_group.values()), per_group
