"""The one output format of the measurement scripts, after nccl-tests' habit.

    # <title>
    # command:  the command line as run (torchrun's, when a worker of it)
    # machine:  hostname, CPU count and model, GPUs
    # versions: python, torch, dynamiccl_pg (LIBRARY_VERSION), NCCL
    # env:      DYNAMICCL_* / NCCL_* variables set, if any
    # started:  the local time, to the second
    # <parameter>: <value>     (the script's own, one per line)
    #
    #group      us/call  /gloo  #wrong     <- the column names, '#'-prefixed
     gloo         812.3  1.000       0     <- one row per measurement
    # <note>                               <- anything else, '#'-prefixed
    # wrong values: 0 of 8 checked (4 rows) OK

Every line but the rows starts with '#', rows start with a space, and no cell holds whitespace,
so a reader takes the rows with ``line.split()`` under the names of the column line (the first
after the header's lone '#'): ``read_rows`` does. ``#wrong`` counts the elements that differ from
the exactly known result (``pattern`` and ``summed`` make such results: integers, whose float32
sums are exact in any order); ``footer`` totals it, and returns the exit status: 1 when any
element was wrong.

    out = Report()            # or Report(file=None) on ranks that print nothing
    out.header("tiny all-reduce", {"ranks": 4})
    out.columns(Column("group", "s"), Column("us/call", ".1f", 9), Column(WRONG, "d"))
    out.row("gloo", 812.3, 0, checked=4)
    sys.exit(out.footer())
"""

from __future__ import annotations

import datetime
import os
import shlex
import socket
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

WRONG = "#wrong"
ENV_PREFIXES = ("DYNAMICCL_", "NCCL_")
PERIOD = 1021  # pattern()'s period: a prime, so chunk boundaries rarely fall on it


@dataclass(frozen=True)
class Column:
    """A named column: values formatted with ``format(value, fmt)``; fmt "s" aligns left."""

    name: str
    fmt: str = ""
    width: int = 0

    def cell(self, value) -> str:
        return self._align("N/A" if value is None else format(value, self.fmt))

    def head(self) -> str:
        return self._align(self.name)

    def _align(self, text: str) -> str:
        if not text or any(c.isspace() for c in text):
            raise ValueError(f"column {self.name}: cell {text!r} is empty or holds whitespace")
        w = max(self.width, len(self.name))
        return text.ljust(w) if self.fmt == "s" else text.rjust(w)


def command_line(argv: Optional[Sequence[str]] = None) -> str:
    """The command as run: the launcher's when this process is a torchrun worker (its parent's
    command line names this script), else this interpreter's; the programs by their base name."""
    if argv is None:
        argv = list(getattr(sys, "orig_argv", None) or ["python", *sys.argv])
        launcher = _parent_argv() if "TORCHELASTIC_RUN_ID" in os.environ else []
        if sys.argv and sys.argv[0] in launcher:
            argv = launcher
    argv = list(argv)
    if len(argv) > 1 and "python" in os.path.basename(argv[0]) and \
            os.path.basename(argv[1]) == "torchrun":
        argv = argv[1:]  # the torchrun entry script, run by its interpreter
    if argv:
        argv[0] = os.path.basename(argv[0])
    return shlex.join(argv)


def _parent_argv() -> List[str]:
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def machine() -> str:
    cpus = f"{os.cpu_count()} CPUs"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f
                          if ln.startswith("model name")), "")
        cpus += f" ({model})" if model else ""
    except OSError:
        pass
    import torch
    gpus = "none"
    if torch.cuda.is_available():
        gpus = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    return f"{socket.gethostname()}, {cpus}, GPU: {gpus}"


def versions() -> str:
    import platform

    import torch
    try:
        from dynamiccl_pg.config import LIBRARY_VERSION as dynamiccl
    except Exception as e:  # the header still names what it could not import
        dynamiccl = f"not importable ({type(e).__name__})"
    try:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:
        nccl = "not in this torch"
    return (f"python {platform.python_version()}, torch {torch.__version__}, "
            f"dynamiccl_pg {dynamiccl}, NCCL {nccl}")


def header_lines(title: str, params: Optional[Dict[str, object]] = None,
                 argv: Optional[Sequence[str]] = None) -> List[str]:
    lines = [f"# {title}", f"# command:  {command_line(argv)}", f"# machine:  {machine()}",
             f"# versions: {versions()}"]
    env = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(ENV_PREFIXES))
    if env:
        lines.append(f"# env:      {' '.join(env)}")
    now = datetime.datetime.now().astimezone()
    lines.append(f"# started:  {now.isoformat(timespec='seconds')}")
    lines += [f"# {k}: {v}" for k, v in (params or {}).items()]
    return lines + ["#"]


class Report:
    """Prints the format to ``file`` (sys.stdout by default, as it is when printing; None prints
    nothing) and keeps the totals that ``footer`` closes with."""

    def __init__(self, file: Any = "stdout"):
        self.file = file
        self.cols: List[Column] = []
        self.rows = self.wrong = self.checked = self.unchecked = 0

    def _print(self, line: str) -> None:
        if self.file is not None:
            print(line, file=sys.stdout if self.file == "stdout" else self.file, flush=True)

    def header(self, title: str, params: Optional[Dict[str, object]] = None,
               argv: Optional[Sequence[str]] = None) -> None:
        for line in header_lines(title, params, argv):
            self._print(line)

    def columns(self, *cols: Column) -> None:
        names = [c.name for c in cols]
        if len(set(names)) != len(names):
            raise ValueError(f"column names repeat: {names}")
        self.cols = list(cols)
        self._print("#" + "  ".join(c.head() for c in cols))

    def row(self, *values, checked: Optional[int] = None) -> None:
        """One measurement, a value per column; ``checked``: how many elements its #wrong
        covers (None: its results were not checked, and #wrong must be None, shown N/A)."""
        if len(values) != len(self.cols):
            raise ValueError(f"{len(values)} values for {len(self.cols)} columns")
        self.rows += 1
        for c, v in zip(self.cols, values):
            if c.name == WRONG:
                if v is None or checked is None:
                    self.unchecked += 1
                else:
                    self.wrong += int(v)
                    self.checked += int(checked)
        self._print(" " + "  ".join(c.cell(v) for c, v in zip(self.cols, values)))

    def note(self, text: str) -> None:
        self._print(f"# {text}")

    def footer(self) -> int:
        """The closing line, with the totals; returns the exit status (1: something was wrong)."""
        unchecked = f", {self.unchecked} not checked" if self.unchecked else ""
        verdict = "OK" if self.wrong == 0 else "FAILED"
        rows = f"{self.rows} row{'' if self.rows == 1 else 's'}"
        self._print(f"# wrong values: {self.wrong} of {self.checked} checked "
                    f"({rows}{unchecked}) {verdict}")
        return 1 if self.wrong else 0


def _period(world: int) -> int:
    # Every sum over `world` ranks stays below 2**24, where float32 holds every integer: exact
    # whatever the order of the additions.
    return max(1, min(PERIOD, (1 << 24) // (world * (world + 1) // 2)))


def pattern(rank: int, numel: int, world: int, offset: int = 0):
    """Rank-dependent integer-valued float32, i < numel:
    (rank + 1) * (1 + (offset + i) % period)."""
    import torch
    base = torch.arange(offset, offset + numel, dtype=torch.int32) % _period(world) + 1
    return base.to(torch.float32) * (rank + 1)


def summed(numel: int, world: int, offset: int = 0):
    """The exact sum over ranks 0..world-1 of ``pattern(rank, numel, world, offset)``."""
    return pattern(0, numel, world, offset) * (world * (world + 1) // 2)


def count_wrong(actual, expected) -> int:
    return int((actual != expected).sum())


def read_rows(text: str) -> List[Dict[str, str]]:
    """The rows of an output in this format, each as {column name: cell}: its readers' parser.
    The column line is the first after the header's closing lone '#'; rows start with a space."""
    names: Optional[List[str]] = None
    rows = []
    after_header = False
    for line in text.splitlines():
        if names is None:
            if after_header and line.startswith("#"):
                names = line[1:].split()
            after_header = line == "#"
        elif line.startswith(" ") and len(line.split()) == len(names):
            rows.append(dict(zip(names, line.split())))
    return rows
