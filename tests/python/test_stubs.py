"""The type stubs of dynamiccl_pg._C (dynamiccl_pg/_C/*.pyi) match the built module. After
changing the bindings, regenerate them, in the environment of the newest supported torch, with:

    pybind11-stubgen dynamiccl_pg._C -o .

They are generated against the newest supported torch: the pybind11 that torch bundles decides
how types are spelled (older torch releases spell integer arguments differently), so the check
runs on that torch only.
"""

import os
import subprocess
import sys

import pytest
import torch

from dist_harness import ROOT
from dynamiccl_pg import torch_support


@pytest.mark.skipif(torch_support.minor(torch.__version__) != torch_support.NEWEST,
                    reason=f"the stubs are generated with torch {torch_support.NEWEST}'s pybind11")
def test_stubs_match_the_module(tmp_path):
    subprocess.run([sys.executable, "-m", "pybind11_stubgen", "dynamiccl_pg._C", "-o",
                    str(tmp_path)], check=True, cwd=ROOT, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=ROOT))
    for name in ("__init__.pyi", "sim.pyi"):
        fresh = (tmp_path / "dynamiccl_pg" / "_C" / name).read_text()
        with open(os.path.join(ROOT, "dynamiccl_pg", "_C", name)) as f:
            assert f.read() == fresh, (f"dynamiccl_pg/_C/{name} is stale: regenerate it with "
                                       "`pybind11-stubgen dynamiccl_pg._C -o .`")
