"""Agreement between the ranks of a group, at its creation, through the group's store.

Every rank publishes what it knows; rank 0 combines (or compares) the values and publishes one
verdict; every rank reads the verdict, so every rank ends with the same result or the same error.
Used for the settings that shape decisions (they must be identical: a rank that decides
differently hangs or corrupts its peers' collectives) and for the facts the NCCL prior is built
from (hosts, GPU generation): combined the same way on every rank, never a local guess.
"""

from __future__ import annotations

import json
from typing import Callable, Dict, List

from .errors import AgreementError


def agree(store, rank: int, size: int, topic: str, value, combine: Callable[[List], object]):
    """Publishes ``value`` (JSON-serialisable) under ``topic``; returns ``combine(values of every
    rank, in rank order)`` as computed by rank 0, or raises the AgreementError it raised."""
    store.set(f"dynamiccl/{topic}/{rank}", json.dumps(value, sort_keys=True))
    verdict_key = f"dynamiccl/{topic}/verdict"
    if rank == 0:
        values = [json.loads(store.get(f"dynamiccl/{topic}/{r}")) for r in range(size)]
        try:
            verdict = {"result": combine(values)}
        except AgreementError as e:
            verdict = {"error": str(e)}
        store.set(verdict_key, json.dumps(verdict))
    verdict = json.loads(store.get(verdict_key))
    if "error" in verdict:
        raise AgreementError(verdict["error"])
    return verdict["result"]


def _ranks(ranks: List[int]) -> str:
    """[0, 1, 2, 5] -> "ranks 0-2, 5"."""
    spans, start = [], ranks[0]
    for prev, r in zip(ranks, ranks[1:] + [None]):
        if r != prev + 1:
            spans.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = r
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(spans)


def identical(what: str) -> Callable[[List[Dict]], Dict]:
    """A combine step that accepts only identical dicts and names every key that differs, with its
    value per rank."""
    def combine(values: List[Dict]) -> Dict:
        lines = []
        for key in sorted(set().union(*values)):
            seen: Dict[str, List[int]] = {}
            for r, v in enumerate(values):
                seen.setdefault(json.dumps(v.get(key), sort_keys=True), []).append(r)
            if len(seen) > 1:
                per_rank = "; ".join(f"{_ranks(rs)}: {val}" for val, rs in seen.items())
                lines.append(f"  {key}: {per_rank}")
        if lines:
            raise AgreementError(f"dynamiccl: the ranks of this group have different {what}; "
                                 "they must be the same on every rank:\n" + "\n".join(lines))
        return values[0]
    return combine
