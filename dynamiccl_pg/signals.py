"""What the training loop tells the learner: step() and report_loss() feed its guards (the
step-time guard and the loss-stall guard), through consensus like everything else."""

from __future__ import annotations

import threading
import time

from . import backend as _backend

_step_clock = threading.local()


def step() -> None:
    """Marks the end of a training step; the time since the previous call is the step time,
    which the step-time guard watches (it travels through consensus like everything else)."""
    now = time.perf_counter()
    last = getattr(_step_clock, "t", None)
    _step_clock.t = now
    if last is None:
        return
    for pg in _backend.backends():
        if pg.mode != "off":
            pg.add_step_time((now - last) * 1e6)


def report_loss(loss) -> None:
    """Reports the step's loss (a float or a 0-d tensor) for the loss-stall guard."""
    value = float(loss.detach().item() if hasattr(loss, "detach") else loss)
    for pg in _backend.backends():
        if pg.mode != "off":
            pg.add_loss(value)
