"""What the training loop tells the learner: step() and report_loss() feed its guards (the
step-time guard and the loss-stall guard), through consensus like everything else."""

from __future__ import annotations

from . import groups as _groups


def step() -> None:
    """Marks the end of a training step, at the same point on every rank. The time since the
    previous one is the step time: the step-time guard watches it, and overlapped calls are
    judged by it (step trials). Groups whose steps DDP's hook marks (its last bucket) ignore it.
    """
    for pg in _groups.backends():
        if pg.mode != "off":
            pg.end_step()


def report_loss(loss) -> None:
    """Reports the step's loss (a float or a 0-d tensor) for the loss-stall guard."""
    value = float(loss.detach().item() if hasattr(loss, "detach") else loss)
    for pg in _groups.backends():
        if pg.mode != "off":
            pg.add_loss(value)
