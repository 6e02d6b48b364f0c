"""The supported torch range: stated once (dynamiccl_pg/torch_support.py), enforced at build time
and import, shown truthfully in the README, and never a reason for pip to replace torch."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dist_harness import ROOT
from dynamiccl_pg import _C, torch_support

SUPPORT = Path(ROOT) / "dynamiccl_pg" / "torch_support.py"


@pytest.mark.parametrize("version", ["2.10.0", "2.16.0", "1.13.1+cpu"])
def test_a_torch_outside_the_range_is_named_with_the_range(version):
    with pytest.raises(torch_support.UnsupportedTorchError) as e:
        torch_support.check(version)
    assert version in str(e.value) and "torch 2.11 to 2.15" in str(e.value)
    # The build runs the same check (CMake and setup.py call the script).
    done = subprocess.run([sys.executable, str(SUPPORT), "check", version], capture_output=True,
                          text=True)
    assert done.returncode == 1 and "supported: torch 2.11 to 2.15" in done.stderr


def test_this_build_is_for_the_running_torch():
    assert torch_support.minor(_C.built_for_torch) == torch_support.minor(torch.__version__)
    torch_support.check(torch.__version__)


def test_cxx_standard_follows_torchs_headers():
    assert torch_support.cxx_standard("2.11.0") == 17
    assert torch_support.cxx_standard("2.12.1") == 17
    assert torch_support.cxx_standard("2.13.0") == 20
    assert torch_support.cxx_standard("2.15.0+cu130") == 20


def test_the_readme_table_lists_exactly_the_supported_releases():
    readme = (Path(ROOT) / "README.md").read_text()
    table = readme.split("### Supported PyTorch", 1)[1].split("\n\n")[2]
    rows = [re.split(r"\s*\|\s*", line.strip("| ")) for line in table.splitlines()[2:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (v, f["nccl"], f["tuner_abi"]) for v, f in torch_support.RELEASES.items()]
    assert [r[3] for r in rows] == [f"C++{torch_support.cxx_standard(v)}"
                                    for v in torch_support.RELEASES]


def test_installing_the_package_never_installs_or_replaces_torch(tmp_path):
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation",
                    "--quiet", "--report", str(report), ROOT], check=True, capture_output=True)
    installs = [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]]
    assert installs == ["dynamiccl-pg"], installs
