"""benchmarks/bench_output.py, the measurement scripts' one output format (after nccl-tests'): a
header naming the command, the machine and the versions; named columns with #wrong; a closing
line with the totals and the exit status it implies; and one real two-rank run of
benchmarks/tiny_allreduce.py that shows it checked its results."""

import io
import os
import platform
import re
import socket
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from bench_output import WRONG, Column, Report, read_rows  # noqa: E402
from tiny_allreduce import cpu_by_thread  # noqa: E402

with open(os.path.join(ROOT, "dynamiccl_pg", "config.py")) as _f:
    LIBRARY_VERSION = re.search(r'^LIBRARY_VERSION = "([^"]+)"', _f.read(), re.M).group(1)


def env():
    """The test's own environment, with the checkout importable (after what is already set)."""
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, OMP_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join(p for p in (path, ROOT) if p))


def test_header_names_the_command_machine_and_versions():
    out = io.StringIO()
    Report(out).header("a title", {"ranks": 2}, argv=[
        "/venv/bin/python3", "/venv/bin/torchrun", "--nproc-per-node=2", "b.py", "--rounds", "1"])
    lines = out.getvalue().splitlines()
    assert all(line.startswith("#") for line in lines)
    assert lines[0] == "# a title" and lines[-1] == "#"
    assert "# command:  torchrun --nproc-per-node=2 b.py --rounds 1" in lines
    assert "# ranks: 2" in lines
    machine = next(line for line in lines if line.startswith("# machine:"))
    assert socket.gethostname() in machine and f"{os.cpu_count()} CPUs" in machine
    assert "GPU: " in machine
    versions = next(line for line in lines if line.startswith("# versions:"))
    for part in (f"python {platform.python_version()}", f"torch {torch.__version__}",
                 f"dynamiccl_pg {LIBRARY_VERSION}", "NCCL "):
        assert part in versions


def test_rows_line_up_under_named_columns():
    out = io.StringIO()
    r = Report(out)
    r.columns(Column("arm", "s", 8), Column("us", ".1f", 7), Column(WRONG, "d"))
    r.row("ring", 12.34, 0, checked=4)
    r.row("tree", 5.0, None)  # not checked: N/A
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["#arm", "us", WRONG]
    assert lines[1].split() == ["ring", "12.3", "0"] and lines[2].split() == ["tree", "5.0", "N/A"]
    assert len({len(line) for line in lines}) == 1  # fixed widths
    assert read_rows("#\n" + out.getvalue()) == [
        {"arm": "ring", "us": "12.3", WRONG: "0"}, {"arm": "tree", "us": "5.0", WRONG: "N/A"}]
    assert r.footer() == 0
    assert out.getvalue().splitlines()[-1] == "# wrong values: 0 of 4 checked (2 rows, 1 not " \
                                              "checked) OK"


def test_a_wrong_row_fails_the_footer_and_the_exit_status():
    out = io.StringIO()
    r = Report(out)
    r.columns(Column("arm", "s"), Column(WRONG, "d"))
    r.row("ring", 0, checked=8)
    r.row("tree", 3, checked=8)
    assert r.footer() == 1
    assert out.getvalue().splitlines()[-1] == "# wrong values: 3 of 16 checked (2 rows) FAILED"
    # As a script uses it: sys.exit(footer()).
    code = ("import sys; from bench_output import *; r = Report(); "
            "r.columns(Column('arm', 's'), Column(WRONG, 'd')); r.row('ring', 1, checked=4); "
            "sys.exit(r.footer())")
    proc = subprocess.run([sys.executable, "-c", code], cwd=os.path.join(ROOT, "benchmarks"),
                          capture_output=True, text=True, env=env(), timeout=60)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == "# wrong values: 1 of 4 checked (1 row) FAILED"


def test_tiny_allreduce_on_two_ranks_checks_its_results():
    args = ["benchmarks/tiny_allreduce.py", "--rounds", "1", "--calls", "1", "--warmup", "1"]
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node=2", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env(), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    command = next(line for line in lines if line.startswith("# command:"))
    assert "torch.distributed.run --standalone --nproc-per-node=2 " + " ".join(args) in command
    versions = next(line for line in lines if line.startswith("# versions:"))
    assert f"torch {torch.__version__}" in versions
    assert f"dynamiccl_pg {LIBRARY_VERSION}" in versions
    assert "# ranks: 2" in lines
    columns = next(i for i, line in enumerate(lines) if line.startswith("#group"))
    assert lines[columns - 1] == "#"
    assert lines[columns].split() == ["#group", "us/call", "/gloo", "/frozen", "cpu_us/call",
                                      "cpu_over_gloo", WRONG]
    rows = read_rows(proc.stdout)
    assert [r["group"] for r in rows] == ["gloo", "dynamiccl-off", "dynamiccl-learn",
                                          "dynamiccl-frozen"]
    assert all(r[WRONG] == "0" for r in rows) and float(rows[0]["/gloo"]) == 1.0
    gloo_cpu = float(rows[0]["cpu_us/call"])
    for r in rows:  # each group's CPU excess is its CPU time per call less gloo's
        assert float(r["cpu_us/call"]) > 0
        assert abs(float(r["cpu_over_gloo"]) - (float(r["cpu_us/call"]) - gloo_cpu)) <= 0.11
    assert lines[-1] == "# wrong values: 0 of 8 checked (4 rows) OK"
    assert all(line.startswith(("#", " ")) for line in lines)


def test_tiny_allreduce_charges_cpu_to_the_thread_that_used_it():
    with open("/proc/self/comm") as f:
        me = f.read().strip()
    before = cpu_by_thread()
    start = time.process_time()
    while time.process_time() - start < 0.3:  # this thread burns 0.3 s of CPU
        pass
    after = cpu_by_thread()
    assert after[me] - before[me] >= 0.15, (before, after)
