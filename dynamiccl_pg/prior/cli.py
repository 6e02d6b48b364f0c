"""`python -m dynamiccl_pg prior`: train a learned prior from policy files, and evaluate one.

    python -m dynamiccl_pg prior train --data runs/ --out prior.pt [--epochs N] [--seed S]
                                       [--plot prior.png]
    python -m dynamiccl_pg prior eval --model prior.pt --data held_out_runs/

train writes the model as TorchScript (what DYNAMICCL's backend loads) with its metadata and the
training summary, prints the validation loss per role and, with --plot, a PNG of predicted vs
measured cost ratios on the held-out data. eval loads the model through the backend's own loader
and prints, per role, the mean |log error| and how often the model's cheapest arm is the
measured cheapest (top-1).
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys

__all__ = ["add_arguments", "main", "run"]

PROG = "python -m dynamiccl_pg prior"
MAX_EPOCHS = 1_000_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The prior command's description and actions (train, eval) on ``p``."""
    p.description = ("Train a learned prior (relative arm cost per role) from policy files, or "
                     "evaluate one.")
    sub = p.add_subparsers(dest="action", title="actions", metavar="ACTION", required=True)
    t = sub.add_parser("train", help="train a model from policy files and write it (TorchScript)",
                       description="Train a learned prior from policy files (save_policy's or "
                                   "the simulator's) and write it as TorchScript.")
    t.add_argument("--data", "-d", nargs="+", action="extend", required=True, metavar="PATH",
                   help="policy files, or directories searched recursively for *.json")
    t.add_argument("--out", "-o", required=True, metavar="FILE.pt", help="the model to write")
    t.add_argument("--epochs", type=int, default=300, metavar="N", help="default 300")
    t.add_argument("--seed", type=int, default=0, metavar="S",
                   help="weights, split and batch order (default 0)")
    t.add_argument("--plot", metavar="FILE.png",
                   help="write predicted vs measured cost ratio on the held-out data")
    t.add_argument("--hidden", type=int, default=64, metavar="H",
                   help="width of the shared encoder (default 64)")
    t.add_argument("--members", type=int, default=4, metavar="M",
                   help="networks in the ensemble; their disagreement widens the model's "
                        "sigma where the data taught them little (default 4)")
    t.add_argument("--lr", type=float, default=1e-2, help="Adam's learning rate (default 1e-2)")
    t.add_argument("--val-fraction", type=float, default=0.2, metavar="F",
                   help="share of files (or states, with one file) held out (default 0.2)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    e = sub.add_parser("eval", help="score a model on policy files, through the backend's loader",
                       description="Score a learned prior on policy files: per role, mean |log "
                                   "error| and top-1 (model's cheapest arm = measured cheapest).")
    e.add_argument("--model", "-m", required=True, metavar="FILE.pt", help="the model to score")
    e.add_argument("--data", "-d", nargs="+", action="extend", required=True, metavar="PATH",
                   help="policy files, or directories searched recursively for *.json")


def main(argv: list[str]) -> int:
    """`python -m dynamiccl_pg.prior.cli ARGS`, as `python -m dynamiccl_pg prior ARGS`."""
    argv = list(argv)
    parser = argparse.ArgumentParser(prog=PROG)
    add_arguments(parser)
    return run(parser.parse_args(argv), argv, parser)


def run(args: argparse.Namespace, words: list[str], parser: argparse.ArgumentParser) -> int:
    """Runs the parsed action; ``words`` are the command's arguments as typed (recorded in the
    model's metadata). Bad input: one line on stderr naming it, status 2."""
    try:
        if args.action == "train":
            return _train(args, words)
        return _eval(args)
    except _Refused as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


class _Refused(Exception):
    """Input this command cannot use: its message names the value and what is accepted."""


def _check_options(args: argparse.Namespace) -> None:
    if not 1 <= args.epochs <= MAX_EPOCHS:
        raise _Refused(f"--epochs {args.epochs} is not accepted; accepted: integers "
                       f"1..{MAX_EPOCHS}")
    if args.hidden < 1:
        raise _Refused(f"--hidden {args.hidden} is not accepted; accepted: integers >= 1")
    if args.members < 1:
        raise _Refused(f"--members {args.members} is not accepted; accepted: integers >= 1")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise _Refused(f"--lr {args.lr} is not accepted; accepted: a number > 0")
    if not 0 <= args.val_fraction < 1:
        raise _Refused(f"--val-fraction {args.val_fraction} is not accepted; accepted: "
                       "0 <= F < 1")
    for option, path in (("--out", args.out), ("--plot", args.plot)):
        if path is None:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder) or os.path.isdir(path):
            raise _Refused(f"{option} {path!r} cannot be written (its folder does not exist, or "
                           "it is a folder); accepted: a file path in an existing folder")


def _samples(paths: list[str]):
    from ..policy_schema import FORMAT, PolicyError
    from .data import PriorDataError, load_samples

    try:
        samples = load_samples(paths)
    except (PriorDataError, PolicyError) as e:  # the command's usage error: one line, status 2
        raise _Refused(str(e))
    if len(samples) == 0:
        read = len(samples.source_files)
        raise _Refused(f"no samples found in {', '.join(repr(p) for p in paths)} ({read} "
                       f"policy file{'s' if read != 1 else ''} read); accepted: policy files "
                       f"({FORMAT}) with states whose default arm was "
                       f"measured")
    return samples


def _train(args: argparse.Namespace, words: list[str]) -> int:
    _check_options(args)
    from .model import ensemble_size
    from .train import plot_heldout, save, train

    try:
        ensemble_size(args.hidden, args.members)
    except ValueError as e:  # too many parameters
        raise _Refused(f"--hidden {args.hidden} --members {args.members}: {e}")
    samples = _samples(args.data)
    print(f"{len(samples.source_files)} policy files, {len(samples)} samples, "
          f"{len(samples.states)} states, data fingerprint {samples.fingerprint[:16]}")
    result = train(samples, epochs=args.epochs, seed=args.seed, hidden=args.hidden,
                   members=args.members, lr=args.lr, val_fraction=args.val_fraction,
                   progress=not args.no_progress)
    command = f"{PROG} " + " ".join(shlex.quote(w) for w in words)
    save(result.model, args.out, {"training": dict(result.summary, command=command)})
    print(f"wrote {args.out} ({result.summary['parameters']} parameters)")
    if args.plot:
        held = bool(result.val_index)
        plot_heldout(result.model, samples, args.plot,
                     result.val_index if held else result.train_index,
                     "held-out data" if held else "training data (nothing held out)")
        print(f"wrote {args.plot}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .. import _C
    from .train import evaluate, format_eval_table

    try:  # the backend's own loader and checks; its message names the file
        prior = _C.PriorModel(args.model)
    except ValueError as e:
        raise _Refused(str(e))
    samples = _samples(args.data)
    trained_on = prior.metadata["data_fingerprint"]
    print(f"{args.model}: {len(samples.source_files)} policy files, {len(samples)} samples, "
          f"{len(samples.states)} states")
    if trained_on and trained_on == samples.fingerprint:
        print("note: this is the model's training data (same data fingerprint), not held-out "
              "data")
    print(format_eval_table(evaluate(prior, samples)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
