"""Runs PyTorch's own distributed_test suite (torch.testing._internal) against one c10d backend.

PyTorch's spawn driver only accepts the built-in backends, so this file is our own driver: it
declares "dynamiccl" to the suite with the same features gloo has, registers the backend, and
builds the spawn test class (one process per rank, per test). Tests named in skips.txt are
skipped before any process is spawned, with the reason written there.

Configuration comes from the environment, so the spawned ranks (which re-import this file) see
exactly what the parent saw:
  BACKEND         dynamiccl (default) or gloo (the baseline)
  WORLD_SIZE      ranks per test (default 2)
  DYNAMICCL_MODE  learn (default) | frozen | off, read by the backend itself
Own options (the rest goes to unittest: test names, -k PATTERN, -v, -f):
  --no-skips      ignore skips.txt (baseline runs; re-checking a "BUG:" entry)
  --skips FILE    another skip list
  --report FILE   write every test's outcome, reason and duration as JSON
  --list          print the selected test names and exit
  --start-method M  spawn (default, as PyTorch runs the suite) or fork (faster)
  --strict-gates  keep the suite's gloo-only tests skipped for dynamiccl (see UNLOCK_GLOO_GATES)
  --timeout S     per-test limit in seconds before the ranks are killed (default 300)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE_CLASS = "TestDistBackendWithSpawn"


def _own_options():
    """Takes this driver's options out of sys.argv before torch's test utilities parse it."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--no-skips", action="store_true")
    parser.add_argument("--skips", default=os.path.join(HERE, "skips.txt"))
    parser.add_argument("--report")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--timeout", type=int)
    parser.add_argument("--strict-gates", action="store_true")
    parser.add_argument("--start-method", choices=("spawn", "fork"), default="spawn")
    opts, rest = parser.parse_known_args(sys.argv[1:])
    sys.argv[1:] = rest
    return opts


def read_skips(path: str, torch_version: str = "") -> dict:
    """skips.txt: `test_name  # reason` per line; blank lines and comment lines are ignored. A
    reason whose tag carries a bound (`TORCH<2.14: ...`) skips the test only on older torch."""
    skips = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            name, sep, reason = text.partition("#")
            name, reason = name.strip(), reason.strip()
            if not sep or not reason or " " in name:
                raise ValueError(f"{path}:{lineno}: expected 'test_name  # reason', got {text!r}")
            bound = re.match(r"[A-Z]+<(\d+)\.(\d+):", reason)
            if bound and torch_version and _minor(torch_version) >= tuple(map(int, bound.groups())):
                continue
            skips[name] = reason
    return skips


def _minor(version: str) -> tuple:
    return tuple(int(p) for p in version.split("+")[0].split(".")[:2])


OPTS = _own_options()
if OPTS.strict_gates:
    os.environ["SUITE_STRICT_GATES"] = "1"  # the spawned ranks read it at import
os.environ.setdefault("BACKEND", "dynamiccl")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
if "MASTER_PORT" not in os.environ:
    # A free port, so that two runs (e.g. the gloo baseline beside dynamiccl) do not collide.
    import socket
    with socket.socket() as _s:
        _s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(_s.getsockname()[1])
if OPTS.timeout:
    # common_distributed reads it at import; the ranks inherit it through the environment.
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(OPTS.timeout)
OWN_TEMP_DIR = None
if "TEMP_DIR" not in os.environ:
    # The suite's file barrier lives in $TEMP_DIR/barrier; setUp replaces it per test, but the
    # module must find one at import.
    OWN_TEMP_DIR = tempfile.mkdtemp(prefix="dynamiccl_suite_")
    os.mkdir(os.path.join(OWN_TEMP_DIR, "barrier"))
    os.environ["TEMP_DIR"] = OWN_TEMP_DIR
    os.environ.setdefault("INIT_METHOD", "file://" + os.path.join(OWN_TEMP_DIR, "init"))

BACKEND = os.environ["BACKEND"]
if BACKEND != "gloo":
    import dynamiccl_pg  # noqa: F401  (registers "dynamiccl" before the suite imports)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# The suite gates tests on these sets; dynamiccl has what gloo has (gloo is in none of the
# skip_collective sets, and is in every backend_feature set but hpu/xpu).
for _feature in ("gpu", "cuda", "ddp", "subgroup", "plugin"):
    DistTestCases.backend_feature[_feature].add(BACKEND)

# The suite gates ~20 tests on `BACKEND == "gloo"` by name (all_reduce_coalesced, get_future,
# no_sync, batch_isend_irecv, barrier timeouts, sparse all-reduce...). dynamiccl claims gloo's CPU
# behaviour, so by default the suite is imported under the name "gloo" (those gates are decided at
# import) and then told the real name, which every process group of every test is created with.
UNLOCK_GLOO_GATES = BACKEND != "gloo" and os.environ.get("SUITE_STRICT_GATES") != "1"
if UNLOCK_GLOO_GATES:
    os.environ["BACKEND"] = "gloo"

from torch.testing._internal.common_utils import instantiate_parametrized_tests  # noqa: E402
from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)

if UNLOCK_GLOO_GATES:
    os.environ["BACKEND"] = BACKEND
    distributed_test.BACKEND = BACKEND
# Tests whose body (not a gate) builds its model only `if BACKEND == "gloo"`; with any other name
# it fails on an unbound variable. Inside their ranks, after the group was created with our
# backend, the suite's module reads "gloo" again.
GLOO_BODY_TESTS = {
    "test_accumulate_gradients_no_sync",
    "test_accumulate_gradients_no_sync_allreduce_hook",
    "test_accumulate_gradients_no_sync_allreduce_with_then_hook",
    "test_accumulate_gradients_no_sync_grad_is_view",
}

SKIPS = {} if OPTS.no_skips else read_skips(OPTS.skips, torch.__version__)
SKIP_LOG = os.environ.get("SUITE_SKIP_LOG")
START_METHOD = OPTS.start_method


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        name = self._testMethodName
        if name in SKIPS:
            # Before spawning: a listed test costs nothing and keeps its written reason.
            raise unittest.SkipTest(SKIPS[name])
        super().setUp()
        if START_METHOD == "fork":
            # Ranks start as copies of this process: no re-import, several times faster.
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()

    def run_test(self, test_name, parent_pipe):
        # The suite's default group must really be ours (a lost BACKEND would run it on gloo).
        assert dist.get_backend() == BACKEND, f"default group runs {dist.get_backend()}"
        # In a rank: a skip raised inside the test ends the process with a generic exit code,
        # which loses the reason; rank 0 writes it where the parent can pick it up.
        method = getattr(self, test_name)

        def recorded(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except unittest.SkipTest as e:
                if SKIP_LOG and self.rank == 0:
                    with open(SKIP_LOG, "a") as f:
                        f.write(f"{test_name}\t{e}\n")
                raise

        setattr(self, test_name, recorded)
        if UNLOCK_GLOO_GATES and test_name in GLOO_BODY_TESTS:
            distributed_test.BACKEND = "gloo"
        super().run_test(test_name, parent_pipe)


instantiate_parametrized_tests(TestDistBackendWithSpawn)


class _Recorder(unittest.TextTestResult):
    """Keeps every test's outcome and duration for the summary line and the JSON report."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = {}
        self._started = {}

    @staticmethod
    def _name(test):
        return test.id().split(".")[-1]

    def startTest(self, test):
        self._started[self._name(test)] = time.monotonic()
        super().startTest(test)

    def _put(self, test, outcome, detail=""):
        name = self._name(test)
        seconds = time.monotonic() - self._started.get(name, time.monotonic())
        self.records[name] = {"outcome": outcome, "seconds": round(seconds, 2),
                              "detail": detail[-20000:]}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._put(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._put(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._put(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._put(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._put(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._put(test, "failed", "unexpected success")


def _refine_skip_reasons(records: dict, log_path: str) -> None:
    """Replaces the generic 'skipped at subprocess level' text with the rank's own reason."""
    if not os.path.exists(log_path):
        return
    with open(log_path) as f:
        for line in f:
            name, _, reason = line.rstrip("\n").partition("\t")
            if records.get(name, {}).get("outcome") == "skipped":
                records[name]["detail"] = reason


def main() -> int:
    mode = os.environ.get("DYNAMICCL_MODE", "learn") if BACKEND != "gloo" else "-"
    label = f"{BACKEND} world_size={os.environ['WORLD_SIZE']} mode={mode}"
    if OPTS.list:
        loader = unittest.TestLoader()
        names = sorted(loader.getTestCaseNames(TestDistBackendWithSpawn))
        for name in names:
            fn = getattr(TestDistBackendWithSpawn, name)
            if name in SKIPS:
                name += f"  # skips.txt: {SKIPS[name]}"
            elif getattr(fn, "__unittest_skip__", False):
                name += f"  # suite: {fn.__unittest_skip_why__}"
            print(name)
        return 0
    skip_log = tempfile.NamedTemporaryFile(prefix="dynamiccl_skips_", suffix=".tsv", delete=False)
    skip_log.close()
    # The ranks read the variable when they import this file.
    os.environ["SUITE_SKIP_LOG"] = skip_log.name
    global SKIP_LOG
    SKIP_LOG = skip_log.name

    start = time.monotonic()
    runner = unittest.TextTestRunner(resultclass=_Recorder, verbosity=2)
    # Bare test names are accepted: they mean this module's suite class.
    args = [f"{SUITE_CLASS}.{a}" if a.startswith("test_") else a for a in sys.argv[1:]]
    program = unittest.main(module=__name__, argv=[sys.argv[0]] + args,
                            testRunner=runner, exit=False)
    elapsed = time.monotonic() - start
    records = program.result.records
    _refine_skip_reasons(records, skip_log.name)
    os.unlink(skip_log.name)
    if OWN_TEMP_DIR:
        shutil.rmtree(OWN_TEMP_DIR, ignore_errors=True)

    counts = {k: sum(r["outcome"] == k for r in records.values())
              for k in ("passed", "failed", "skipped")}
    failed = sorted(n for n, r in records.items() if r["outcome"] == "failed")
    if failed:
        print("\nfailed tests:\n  " + "\n  ".join(failed))
    print(f"\ndistributed_test [{label}]: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped in {elapsed:.0f}s")
    if OPTS.report:
        with open(OPTS.report, "w") as f:
            json.dump({"backend": BACKEND, "world_size": int(os.environ["WORLD_SIZE"]),
                       "mode": mode, "torch": torch.__version__, "seconds": round(elapsed, 1),
                       "counts": counts, "tests": records}, f, indent=1, sort_keys=True)
    return 1 if failed or not records else 0


if __name__ == "__main__":
    sys.exit(main())
