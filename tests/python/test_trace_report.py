"""`python -m dynamiccl_pg report`: from a real 4-rank run's traces, a page and its plots that
reference each other, with the learned states in its table."""

import os
import re
import subprocess
import sys

import pytest
import torch

from dist_harness import ROOT, run_ranks

pytestmark = pytest.mark.timeout(600)


def ddp_steps(rank, world, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Linear(256, 64)),
                bucket_cap_mb=0.03)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(16, 64)).sum().backward()
        opt.step()


def test_report_from_a_real_run(tmp_path):
    prefix = str(tmp_path / "trace")
    run_ranks(ddp_steps, 4, 300, env={"DYNAMICCL_TRACE": prefix, "DYNAMICCL_ROUND_CALLS": "4"})
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "dynamiccl_pg", "report", prefix, "--out",
                           str(out)], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    index = out / "index.html"
    assert proc.stdout.strip() == str(index)
    page = index.read_text()
    images = re.findall(r'<img src="([^"]+)"', page)
    assert images, page
    for name in images:  # every image the page shows exists and is a PNG
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert sorted(p.name for p in out.glob("*.png")) == sorted(images)  # and nothing else
    assert "4 ranks" in page
    # DDP's buckets are one all-reduce state with hundreds of calls, plotted; every byte of the job
    # (DDP's set-up broadcasts too) went through a learned state.
    rows = re.findall(r"<tr><td>0</td><td>cpu</td><td>\w+</td><td>(\w+)</td><td>[^<]+</td>"
                      r"<td>(\d+)</td>", page)
    assert any(op == "allreduce" and int(n) > 500 for op, n in rows), rows
    assert all(int(n) >= 8 for _, n in rows)  # one-off set-up calls are counted, not shown
    share = float(re.search(r"bytes under a learned state: ([\d.]+)%", page).group(1))
    assert share == 100.0


def test_report_without_traces_names_what_it_looked_for(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dynamiccl_pg", "report", str(tmp_path / "none"),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode != 0
    assert "none.rank*.jsonl" in proc.stderr
