"""The PyTorch releases this project supports, stated once.

Read without importing the package (it needs a built module and torch): by setup.py and CMake at
build time, by ``dynamiccl_pg/__init__.py`` at import, by scripts/env.sh to pick the torch it
installs, and by the test that keeps the README's table true. Run as a script:

    python dynamiccl_pg/torch_support.py check [VERSION]   # exit 1 naming the range if unsupported
    python dynamiccl_pg/torch_support.py pin newest|oldest  # the exact torch the scripts install
    python dynamiccl_pg/torch_support.py cxx-standard VERSION  # 20 where torch's headers need it
"""

from __future__ import annotations

import sys

# Per supported minor release: the NCCL its CUDA wheels bring, the tuner ABI that NCCL loads
# first (our plugin exports v2-v6), and the exact release the scripts and CI install.
RELEASES = {
    "2.11": {"nccl": "2.28.9", "tuner_abi": "v5", "pin": "2.11.0"},
    "2.12": {"nccl": "2.29.7", "tuner_abi": "v5", "pin": "2.12.1"},
    "2.13": {"nccl": "2.29.7", "tuner_abi": "v5", "pin": "2.13.0"},
    "2.14": {"nccl": "2.30.7", "tuner_abi": "v6", "pin": "2.14.1"},
    "2.15": {"nccl": "2.30.7", "tuner_abi": "v6", "pin": "2.15.0"},
}
OLDEST, NEWEST = list(RELEASES)[0], list(RELEASES)[-1]  # (listed oldest first)
# torch's headers use C++20 from this minor release on; older ones build as C++17.
CXX20_FROM = "2.13"


class UnsupportedTorchError(ImportError):
    """The torch in this environment is outside the supported range."""


def minor(version: str) -> str:
    """'2.15.0+cu130' -> '2.15'."""
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:2])


def _key(v: str):
    return tuple(int(p) for p in minor(v).split("."))


def describe_range() -> str:
    return f"torch {OLDEST} to {NEWEST} ({', '.join(RELEASES)})"


def check(version: str) -> None:
    """Raises UnsupportedTorchError naming the supported range when ``version`` is outside it."""
    if minor(version) not in RELEASES:
        raise UnsupportedTorchError(
            f"dynamiccl: torch {version} is not supported; supported: {describe_range()}. "
            "Install a supported torch, or use a dynamiccl release made for yours")


def cxx_standard(version: str) -> int:
    return 20 if _key(version) >= _key(CXX20_FROM) else 17


def _main(argv) -> int:
    if len(argv) >= 1 and argv[0] == "check":
        if len(argv) > 1:
            version = argv[1]
        else:
            import torch
            version = torch.__version__
        try:
            check(version)
        except UnsupportedTorchError as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    if len(argv) == 2 and argv[0] == "pin" and argv[1] in ("newest", "oldest"):
        print(RELEASES[NEWEST if argv[1] == "newest" else OLDEST]["pin"])
        return 0
    if len(argv) == 2 and argv[0] == "cxx-standard":
        print(cxx_standard(argv[1]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
