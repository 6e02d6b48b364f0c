"""Runs a function on N real processes joined by a real c10d store (FileStore), one process per
rank, each with its own default process group; collects every rank's return value or error.

    results = run_ranks(fn, world_size=4, backend="dynamiccl", env={"DYNAMICCL_MODE": "off"})
    results = run_ranks(fn, 2, rank_env={1: {"DYNAMICCL_MODE": "off"}})  # one rank differs

`fn(rank, world_size, *args)` must be a module-level function of an importable test module.
A rank that raises fails the run with its traceback; one that dies without a result fails it as
soon as that is seen; one that hangs past `timeout` fails it too (the processes are killed), so no
test can hang the suite.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue as queue_module
import tempfile
import time
import traceback
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _child(rank, world_size, store_path, backend, env, pg_timeout_s, init_kwargs, fn, args,
           queue):
    try:
        os.environ.update(env.get(rank, env[None]))
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        import dynamiccl_pg  # noqa: F401  registers "dynamiccl"
        store = dist.FileStore(store_path, world_size)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=pg_timeout_s), **init_kwargs)
        try:
            result = fn(rank, world_size, *args)
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
        # Plain pickle: tensors travel by value, not as shared-memory handles that die with us.
        queue.put((rank, True, pickle.dumps(result)))
    except BaseException:  # report everything, including assertion errors
        queue.put((rank, False, traceback.format_exc()))


def run_ranks(fn: Callable, world_size: int, *args, backend: str = "dynamiccl",
              env: Optional[Dict[str, str]] = None, timeout: float = 180,
              pg_timeout_s: float = 60, expect_failure: bool = False,
              rank_env: Optional[Dict[int, Dict[str, str]]] = None,
              init_kwargs: Optional[Dict[str, Any]] = None) -> List[Any]:
    """Returns the per-rank results (or, with expect_failure, the per-rank error texts/results).
    ``rank_env`` adds variables for single ranks on top of ``env``; ``init_kwargs`` goes to
    init_process_group (e.g. enable_reconfigure=True)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    child_env = {"PYTHONPATH": os.pathsep.join([ROOT, HERE, os.environ.get("PYTHONPATH", "")])}
    child_env.update(env or {})
    os.environ["PYTHONPATH"] = child_env["PYTHONPATH"]  # spawn children import by module name
    envs = {None: child_env}
    envs.update({r: {**child_env, **extra} for r, extra in (rank_env or {}).items()})
    with tempfile.TemporaryDirectory() as tmp:
        store_path = os.path.join(tmp, "store")
        procs = [ctx.Process(target=_child, args=(r, world_size, store_path, backend, envs,
                                                  pg_timeout_s, init_kwargs or {}, fn, args,
                                                  queue), daemon=True)
                 for r in range(world_size)]
        for p in procs:
            p.start()
        results: Dict[int, Any] = {}
        errors: Dict[int, str] = {}
        deadline = time.monotonic() + timeout
        try:
            while len(results) + len(errors) < world_size:
                # A rank's result reaches the pipe before its process ends: one that had ended
                # before a wait that brought nothing died without one (no need to wait it out).
                ended = [r for r, p in enumerate(procs) if p.exitcode is not None]
                try:
                    rank, ok, payload = queue.get(timeout=min(1.0, timeout))
                except queue_module.Empty:
                    pending = set(range(world_size)) - set(results) - set(errors)
                    errors.update({r: f"rank {r} exited with code {procs[r].exitcode} without "
                                      "a result" for r in pending.intersection(ended)})
                    if time.monotonic() > deadline:
                        raise
                    continue
                if ok:
                    results[rank] = pickle.loads(payload)
                else:
                    errors[rank] = payload
        except queue_module.Empty:
            missing = sorted(set(range(world_size)) - set(results) - set(errors))
            errors.update({r: f"rank {r} did not finish within {timeout}s" for r in missing})
        finally:
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
                    p.join()
    if expect_failure:
        return [errors.get(r, results.get(r)) for r in range(world_size)]
    if errors:
        raise AssertionError("\n".join(f"--- rank {r} ---\n{e}" for r, e in sorted(errors.items())))
    return [results[r] for r in range(world_size)]
