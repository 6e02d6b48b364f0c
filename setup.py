"""pip install --no-build-isolation . (or -e .) builds the C++ core, the _C module and the NCCL
plugin with CMake, against the torch already installed, which it never replaces: torch is not a
requirement of the package (c10d's Backend vtable changes between torch minor releases, so the
module is built for exactly the torch it will run with). The supported range is stated in
dynamiccl_pg/torch_support.py; a torch outside it stops the build with an error naming the range.
"""

import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def installed_torch() -> str:
    """The version of the torch this build will run with; stops with the supported range if it
    is missing or outside the range."""
    support = runpy.run_path(str(ROOT / "dynamiccl_pg" / "torch_support.py"))
    try:
        import torch
    except ImportError:
        sys.exit("dynamiccl: building needs torch installed first (supported: "
                 f"{support['describe_range']()}), and pip install --no-build-isolation so that "
                 "the build sees it")
    try:
        support["check"](torch.__version__)
    except ImportError as e:
        sys.exit(str(e))
    return torch.__version__


def library_version() -> str:
    """The version every rank's fingerprint compares, defined once in dynamiccl_pg/config.py."""
    m = re.search(r'^LIBRARY_VERSION = "([^"]+)"',
                  (ROOT / "dynamiccl_pg" / "config.py").read_text(), re.M)
    if not m:
        raise RuntimeError("dynamiccl_pg/config.py must define LIBRARY_VERSION")
    return m.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # One build folder per interpreter and torch: a folder configured for another one is
        # never reused.
        torch_version = installed_torch()
        tag = f"py{sys.version_info[0]}{sys.version_info[1]}-torch{torch_version}"
        build_dir = Path(os.environ.get("DYNAMICCL_BUILD", ROOT / "build" / "pip" / tag))
        if not (build_dir / "CMakeCache.txt").exists():
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir),
                                   "-DCMAKE_BUILD_TYPE=Release",
                                   f"-DPython_EXECUTABLE={sys.executable}",
                                   "-DDYNAMICCL_BUILD_TESTS=OFF",
                                   "-DDYNAMICCL_BUILD_BENCHMARKS=OFF"])
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "dynamiccl_package",
                               "-j", str(os.cpu_count() or 2)])
        # CMake writes _C and the plugin into dynamiccl_pg/; a regular install copies them over.
        out_dir = Path(self.get_ext_fullpath(ext.name)).parent
        out_dir.mkdir(parents=True, exist_ok=True)
        for built in (ROOT / "dynamiccl_pg").glob("*.so"):
            if built.parent.resolve() != out_dir.resolve():
                shutil.copy2(built, out_dir / built.name)


setup(
    name="dynamiccl-pg",
    version=library_version(),
    description="A PyTorch c10d backend that learns per-collective engine configurations online",
    packages=find_packages(include=["dynamiccl_pg", "dynamiccl_pg.*"]),
    ext_modules=[Extension("dynamiccl_pg._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    entry_points={
        # torch >= 2.14 loads a backend by name from this group.
        "torch.distributed.backends": ["dynamiccl = dynamiccl_pg.backend:register"],
    },
)
