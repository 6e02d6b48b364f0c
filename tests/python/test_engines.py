"""The engines under a group are the ones torch would have given the user: Gloo for CPU tensors,
and for CUDA tensors whatever `nccl` means in the installed torch (nccl2 on 2.15, the legacy
ProcessGroupNCCL under TORCH_DIST_USE_NCCL2=0 and before 2.15), made through torch's own creator;
DYNAMICCL_INNER names another engine torch has registered, and a name torch lacks for the device
is one error listing what it has. stats() and the summary say which engines run."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import dynamiccl_pg
from dist_harness import ROOT, run_ranks
from dynamiccl_pg import engines
from dynamiccl_pg.config import ConfigError, parse_inner

NCCL2 = hasattr(dist, "ProcessGroupNCCL2")


def _engines_of_the_world(rank, world):
    t = torch.ones(8)
    dist.all_reduce(t)
    return dynamiccl_pg.stats()["engines"], dynamiccl_pg.format_summary().splitlines()[0]


def test_cpu_groups_run_on_gloo_and_say_so():
    for named, summary in run_ranks(_engines_of_the_world, 2):
        assert named == {"cpu": "gloo (ProcessGroupGloo)"}, named
        assert "cpu on gloo (ProcessGroupGloo)" in summary, summary


def _creator_of_nccl():
    plugin = engines.creator("nccl")
    return None if plugin is None else plugin.creator_fn.__name__


@pytest.mark.skipif(not NCCL2, reason="this torch has no nccl2: `nccl` is ProcessGroupNCCL")
@pytest.mark.parametrize("use_nccl2, expected", [(None, "_create_nccl2_process_group"),
                                                 ("0", "_create_nccl_process_group")])
def test_cuda_engine_is_what_nccl_means_in_this_torch(use_nccl2, expected):
    # torch reads TORCH_DIST_USE_NCCL2 once, when it registers `nccl`: a fresh interpreter each.
    env_line = "" if use_nccl2 is None else f"os.environ['TORCH_DIST_USE_NCCL2'] = '{use_nccl2}'"
    code = (f"import os\n{env_line}\nimport sys; sys.path.insert(0, {ROOT!r})\n"
            "from tests.python.test_engines import _creator_of_nccl\nprint(_creator_of_nccl())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout.split()[-1]
    assert out == expected
    assert engines.creator("nccl-legacy").creator_fn.__name__ == "_create_nccl_process_group"


def test_inner_engine_names_are_parsed_and_checked_against_torchs_registry():
    assert parse_inner("") == {"cpu": "gloo", "cuda": "nccl"}
    assert parse_inner("cuda:NCCL-Legacy") == {"cpu": "gloo", "cuda": "nccl-legacy"}
    for bad in ("nccl", "gpu:nccl", "cuda:", "cuda:dynamiccl"):
        with pytest.raises(ConfigError, match="DYNAMICCL_INNER"):
            parse_inner(bad)
    engines.check({"cpu": "gloo", "cuda": "nccl"})
    with pytest.raises(ConfigError) as e:
        engines.check({"cpu": "gloo", "cuda": "nosuch"})
    assert "no engine 'nosuch' for cuda tensors" in str(e.value)
    assert "nccl" in str(e.value).split("registered for cuda: ")[1]
    with pytest.raises(ConfigError, match="no engine 'nccl' for cpu tensors; registered for cpu: "):
        engines.check({"cpu": "nccl", "cuda": "nccl"})


def _init_only(rank, world):
    return None


def test_an_engine_torch_lacks_fails_group_creation_naming_what_it_has():
    errors = run_ranks(_init_only, 2, env={"DYNAMICCL_INNER": "cuda:nosuch"},
                       expect_failure=True)
    for e in errors:
        assert "DYNAMICCL_INNER: torch has no engine 'nosuch' for cuda tensors" in e, e
