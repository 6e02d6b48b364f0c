"""A representative slice of PyTorch's own distributed_test suite, run against dynamiccl.

The whole suite is run by hand with tests/torch_suite/run_distributed_test.py (see
tests/torch_suite/README.md); this file keeps a few dozen fast CPU tests in every test run:
all-reduce (ops, async, complex, coalesced, sparse), broadcast, reduce, all-gather, gather,
scatter, send/recv, barrier (with timeouts, monitored), Work futures and DDP basics (with
create_graph). They run three ways: on the engine's default arms, and with our own CPU schedules
forced on every op (so PyTorch's expectations check their results) on 2 and on 3 ranks
(non-power-of-two). Most collectives run under the profiler, whose range our schedule worker
ends: that covers the profiler race fixed in DynamicWork.
Ranks are forked (the wrapper's fast mode); one case spawns them fresh, as PyTorch does, to
cover the import-time registration path.

The suite has no CPU reduce_scatter test (its reduce_scatter tests are NCCL-only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "tests" / "torch_suite" / "run_distributed_test.py"
SKIPS = ROOT / "tests" / "torch_suite" / "skips.txt"

SUBSET = [
    # all-reduce
    "test_all_reduce_sum", "test_all_reduce_sum_async", "test_all_reduce_max",
    "test_all_reduce_min", "test_all_reduce_product", "test_all_reduce_sum_complex",
    "test_all_reduce_complex_unsupported_ops", "test_all_reduce_full_group_sum",
    "test_all_reduce_coalesced_sum", "test_all_reduce_coalesced_full_group_max",
    "test_sparse_all_reduce_sum",
    # broadcast, reduce
    "test_broadcast", "test_broadcast_full_group", "test_reduce_sum", "test_reduce_sum_twice",
    "test_reduce_full_group_max",
    # all-gather, gather, scatter
    "test_all_gather", "test_all_gather_complex", "test_all_gather_full_group",
    "test_all_gather_object_default_pg", "test_all_gather_coalesced_simple", "test_gather",
    "test_scatter", "test_scatter_object_list",
    # point-to-point
    "test_send_recv", "test_isend", "test_irecv", "test_send_recv_any_source",
    "test_batch_isend_irecv_gloo",
    # barrier
    "test_barrier", "test_barrier_full_group", "test_barrier_timeout_global",
    "test_monitored_barrier_gloo_rank_0_timeout",
    # Work futures and DDP
    "test_get_future", "test_DistributedDataParallelCPU",
    "test_DistributedDataParallelCPU_grad_is_view",
    "test_DistributedDataParallel_requires_grad", "test_grads_same_across_ranks_with_no_sync",
    "test_static_graph_api_cpu", "test_ddp_create_graph",
    # group management
    "test_get_backend", "test_destroy_group",
]

# Every CPU schedule of ours on the ops it serves (arm names from the CPU arm catalog).
FORCE_RING_TREE = "allreduce:ring;broadcast:tree;reduce:tree;allgather:ring;reduce_scatter:ring"
FORCE_RD_SEGMENTED = ("allreduce:rd;broadcast:ring_s8;reduce:ring_s8;allgather:rd;"
                      "reduce_scatter:rd")


def _env(world_size: int, force: str = "") -> dict:
    env = dict(os.environ)
    for name in [n for n in env if n.startswith("DYNAMICCL_")]:
        del env[name]  # a developer's own settings must not change what is checked
    env.update(BACKEND="dynamiccl", WORLD_SIZE=str(world_size), DYNAMICCL_MODE="learn")
    if force:
        env["DYNAMICCL_FORCE"] = force
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TEMP_DIR", None)
    env.pop("MASTER_PORT", None)
    return env


def _run_suite(tmp_path, names, world_size=2, force="", start_method="fork"):
    report = tmp_path / "report.json"
    cmd = [sys.executable, str(WRAPPER), "--start-method", start_method, "--timeout", "120",
           "--report", str(report), *names]
    proc = subprocess.run(cmd, env=_env(world_size, force), cwd=ROOT, capture_output=True,
                          text=True, timeout=540)
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert report.exists(), f"the wrapper wrote no report (exit {proc.returncode}):\n{tail}"
    tests = json.loads(report.read_text())["tests"]
    not_passed = {n: (r["outcome"], r["detail"][-1500:]) for n, r in tests.items()
                  if r["outcome"] != "passed"}
    missing = sorted(set(names) - set(tests))
    assert not missing, f"tests not run: {missing}"
    assert not not_passed, f"tests that did not pass: {json.dumps(not_passed, indent=1)}"
    assert proc.returncode == 0, tail


@pytest.mark.parametrize("world_size,force", [
    (2, ""),
    (2, FORCE_RING_TREE),
    (3, FORCE_RD_SEGMENTED),
], ids=["ws2-default-arms", "ws2-forced-ring-tree", "ws3-forced-rd-segmented"])
def test_subset(tmp_path, world_size, force):
    _run_suite(tmp_path, SUBSET, world_size=world_size, force=force)


def test_spawned_ranks_register_backend(tmp_path):
    # Spawned ranks import the wrapper afresh: the backend must register on that import.
    _run_suite(tmp_path, ["test_all_reduce_sum", "test_broadcast"], start_method="spawn")


def test_skip_list_names_suite_tests():
    # A stale entry (a test renamed or removed by a torch upgrade) would hide nothing and
    # mislead readers; every entry must name a test of the installed suite, with a reason.
    proc = subprocess.run([sys.executable, str(WRAPPER), "--list", "--no-skips"],
                          env=_env(2), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    suite = {line.split()[0] for line in proc.stdout.splitlines() if line.startswith("test_")}
    assert len(suite) > 200, proc.stdout[-2000:]
    entries = {}
    for line in SKIPS.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, reason = line.partition("#")
            entries[name.strip()] = reason.strip()
    assert entries, "skips.txt lists no test"
    assert not sorted(set(entries) - suite), "skips.txt names tests the suite does not have"
    assert all(entries.values()), "every skips.txt entry needs a reason"
    assert set(SUBSET) <= suite - set(entries), "the CI subset must not hold skipped tests"
