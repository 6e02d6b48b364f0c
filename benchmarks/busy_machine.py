"""A busy machine for the measurement scripts (--load): processes that spin on the CPU while a
measurement runs, as a CPU training job's cores are busy with its compute beside its collectives.

    with busy_machine(2):
        ...  # measured with two processes spinning
"""

import contextlib

import torch.multiprocessing as mp


def _spin(stop) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(10000):
            x += 1


@contextlib.contextmanager
def busy_machine(processes: int):
    """`processes` busy processes for the duration of the block (0: none)."""
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    spinners = [ctx.Process(target=_spin, args=(stop,), daemon=True) for _ in range(processes)]
    for proc in spinners:
        proc.start()
    try:
        yield
    finally:
        stop.set()
        for proc in spinners:
            proc.join()
