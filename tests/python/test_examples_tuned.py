"""The examples as a user runs them (torchrun, 4 CPU ranks, DYNAMICCL_TRACE): nearly every byte the
frameworks send goes through a learned state, read from the traces by the report page, and the
tensor-parallel traffic DTensor sends lands under the tp head."""

import os
import re
import subprocess
import sys

import pytest

from dist_harness import ROOT

pytestmark = pytest.mark.timeout(600)


def run_example(tmp_path, script, *args):
    prefix = str(tmp_path / "trace")
    env = dict(os.environ, PYTHONPATH=ROOT, DYNAMICCL_TRACE=prefix, OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc-per-node=4", os.path.join(ROOT, "examples", script), *args],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=480)
    assert run.returncode == 0, run.stderr[-4000:]
    report = subprocess.run([sys.executable, "-m", "dynamiccl_pg", "report", prefix, "--out",
                             str(tmp_path / "report")], capture_output=True, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    share = float(re.search(r"bytes under a learned state: ([\d.]+)%", page).group(1))
    return run.stdout, share


@pytest.mark.parametrize("script, args, heads", [
    ("train_dtensor_tp.py", ("--steps", "20"), {"tp"}),
    ("train_fsdp2.py", ("--steps", "20"), {"fsdp_ag", "fsdp_rs"}),
])
def test_the_bytes_frameworks_send_are_tuned(tmp_path, script, args, heads):
    summary, share = run_example(tmp_path, script, *args)
    assert share >= 95.0, (share, summary)
    # The summary's learned table: role, op, size, exposure, incumbent, phase, ...
    learned_roles = set(re.findall(r"^\s+(\w+)\s+\w+\s+>=\S+\s+\S+\s+\S+\s+"
                                   r"(?:warmup|probing|exploit|settled|frozen)\s", summary, re.M))
    assert heads <= learned_roles, summary
