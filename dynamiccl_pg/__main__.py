"""Command line: ``python -m dynamiccl_pg COMMAND [options]``; ``COMMAND --help`` lists its options.

One argparse parser with a subparser per command. A command is an entry of COMMANDS: its line in
the command list, the function that defines its options (in the module that runs it) and the
function that runs it; a new command (e.g. ``prior``) is one more entry.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, List, NamedTuple, Optional

from . import trace_report as _report
from .prior import cli as _prior_cli
from .sim import cli as _sim_cli

PROG = "python -m dynamiccl_pg"


class Command(NamedTuple):
    help: str  # its line in the command list
    add_arguments: Callable[[argparse.ArgumentParser], None]
    # (parsed options, the command's own words as typed, its parser for usage errors) -> status
    run: Callable[[argparse.Namespace, List[str], argparse.ArgumentParser], int]


def _no_options(_parser: argparse.ArgumentParser) -> None:
    """config and actions take no options; their subparser gives them --help."""


def _run_actions(_args, _words, _parser) -> int:
    from . import _C, config
    from .engines import nccl_version_code
    # NCCL's arms depend on its release (chunk-size arms need 2.30): list the ones torch's NCCL
    # would be offered.
    nccl_version = nccl_version_code(None)
    print(f"NCCL arms for torch's NCCL {nccl_version // 10000}.{nccl_version // 100 % 100} "
          "(on the default topology: one node of eight Hopper GPUs on NVLink)\n")
    print(f"{'op':<15} {'engine':<6} arms (first = engine default)")
    for op in config.OPS:
        for i, (name, engine) in enumerate(_C.Engine.__members__.items()):
            arms = _C.arm_names(engine, op, nccl_version=nccl_version)
            print(f"{op if i == 0 else '':<15} {name:<6} {', '.join(arms)}")
    print("\npin an op to an arm on every rank: DYNAMICCL_FORCE=\"allreduce:ring;allgather:rd\"")
    return 0


def _run_config(_args, _words, _parser) -> int:
    from . import _C, config
    for name, (default, doc) in config.ENV_VARS.items():
        current = os.environ.get(name)
        shown = f"{current!r}" if current is not None else "(unset)"
        print(f"{name:<28} default {default!r:<9} now {shown:<12} {doc}")
    print("\nlearner head settings (DYNAMICCL_HEADS=\"role.key=value;...\", role: all or one of "
          f"{', '.join(config.ROLES)}):")
    defaults = _C.default_heads()
    for s in _C.head_settings():
        per_role = ", ".join(f"{r}={defaults[r][s['name']]:g}" for r in config.ROLES)
        print(f"  {s['name']:<17} {s['range']:<26} {s['doc']}\n  {'':<17} defaults: {per_role}")
    config.validate_environment()
    return 0


COMMANDS = {
    "config": Command("every DYNAMICCL_* variable (default and current value) and the learner "
                      "head settings", _no_options, _run_config),
    "actions": Command("the arms (candidate configurations) per op and engine", _no_options,
                       _run_actions),
    "report": Command("PREFIX --out DIR: a page with plots of what a job learned, from its "
                      "DYNAMICCL_TRACE files", _report.add_arguments, _report.run),
    "sim": Command("--scenario FILE|DIR: run scenarios through the learner (see "
                   "benchmarks/scenarios)", _sim_cli.add_arguments, _sim_cli.run),
    "prior": Command("train|eval: train a learned prior (relative arm cost per role) from "
                     "policy files, or score one", _prior_cli.add_arguments, _prior_cli.run),
}


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each command's subparser, by name."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="DynamICCL's command line; COMMAND --help lists its options.")
    # required: no command is a usage error (status 2) naming the commands, like a wrong one
    sub = parser.add_subparsers(dest="command", title="commands", required=True)
    subparsers = {}
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(p)
        subparsers[name] = p
    return parser, subparsers


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, subparsers = build_parser()
    args, extra = parser.parse_known_args(argv)
    own_parser = subparsers[args.command]
    if extra:  # named by the command's own parser, with its usage
        own_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    words = argv[argv.index(args.command) + 1:]
    return COMMANDS[args.command].run(args, words, own_parser)


if __name__ == "__main__":
    sys.exit(main())
