"""Command line: ``python -m dynamiccl_pg <command>``.

    actions                    the arms (candidate configurations) per op and engine
    config                     every DYNAMICCL_* variable: default and current value
    sim --scenario FILE|DIR    run scenarios through the learner (see benchmarks/scenarios)
    report PREFIX --out DIR    a page with plots of what a job learned, from its DYNAMICCL_TRACE files
"""

import argparse
import os
import sys


def _actions(argv) -> int:
    from . import _C, config
    p = argparse.ArgumentParser(prog="python -m dynamiccl_pg actions")
    p.parse_args(argv)
    print(f"{'op':<15} {'engine':<6} arms (first = engine default)")
    for op in config.OPS:
        for i, (name, engine) in enumerate(_C.Engine.__members__.items()):
            print(f"{op if i == 0 else '':<15} {name:<6} {', '.join(_C.arm_names(engine, op))}")
    print("\npin an op to an arm on every rank: DYNAMICCL_FORCE=\"allreduce:ring;allgather:rd\"")
    return 0


def _config(argv) -> int:
    from . import _C, config
    argparse.ArgumentParser(prog="python -m dynamiccl_pg config").parse_args(argv)
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


def _sim(argv) -> int:
    from .sim.cli import main as sim_main
    return sim_main(argv)


def _report(argv) -> int:
    from .trace_report import main as report_main
    return report_main(argv)


def main(argv) -> int:
    commands = {"actions": _actions, "config": _config, "sim": _sim, "report": _report}
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv[0] not in commands:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
