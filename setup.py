"""pip install . (or -e .) builds the C++ core, the _C module and the NCCL plugin with CMake.

Build against the torch already installed (pip install --no-build-isolation), the exact version
pinned in requirements.txt: c10d's Backend vtable changes between torch minor releases.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def torch_requirement() -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if re.match(r"^torch\s*==", line):
            return line.strip()
    raise RuntimeError("requirements.txt must pin torch")


def library_version() -> str:
    """The version every rank's fingerprint compares, defined once in dynamiccl_pg/config.py."""
    m = re.search(r'^LIBRARY_VERSION = "([^"]+)"', (ROOT / "dynamiccl_pg" / "config.py").read_text(),
                  re.M)
    if not m:
        raise RuntimeError("dynamiccl_pg/config.py must define LIBRARY_VERSION")
    return m.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = Path(os.environ.get("DYNAMICCL_BUILD", ROOT / "build"))
        if not (build_dir / "CMakeCache.txt").exists():
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir),
                                   "-DCMAKE_BUILD_TYPE=Release",
                                   f"-DPython_EXECUTABLE={sys.executable}",
                                   "-DDYNAMICCL_BUILD_TESTS=OFF",
                                   "-DDYNAMICCL_BUILD_BENCHMARKS=OFF"])
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "_C",
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
    install_requires=[torch_requirement()],
    python_requires=">=3.9",
    entry_points={
        # torch >= 2.14 loads a backend by name from this group.
        "torch.distributed.backends": ["dynamiccl = dynamiccl_pg.backend:register"],
    },
)
