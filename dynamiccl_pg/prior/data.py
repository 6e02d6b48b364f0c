"""Training samples from policy files (what save_policy writes, and the simulator too).

A sample is one measured arm of a learner state whose default arm is measured as well: its
features (``_C.prior_features``: the state's and the arm's, the analytic prior's ratio of the arm
to the default among them), the state's role (the model's head), the label (how far the measured
log ratio log(arm.mean_us / default.mean_us) departs from the analytic one: what the model
predicts) and a weight that grows with the arm's samples. The default arm's own row is a sample
with label 0.

A policy file of this release's format is checked whole by ``policy_schema`` (the schema the
backend loads policies with: a broken file is its PolicyError, naming the file and key path);
JSON files that are not policy files, or of another format, are skipped with one line saying so.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

import torch

from .. import _C
from ..policy_schema import FORMAT, validate

__all__ = ["PriorDataError", "Samples", "StateKey", "data_fingerprint",
           "load_samples", "policy_files", "representative_bytes", "sample_weight"]

FULL_WEIGHT_SAMPLES = 16  # an arm measured this many times counts fully

PathLike = Union[str, "os.PathLike[str]"]


class PriorDataError(ValueError):
    """A data path that cannot be used, or a policy file whose content cannot be trained on."""


@dataclass(frozen=True)
class StateKey:
    """One learner state of one file: what its samples share."""
    file: str
    group: str
    engine: str
    role: str
    op: str
    size_bin: int
    exposure: str
    fused: bool
    group_size: int
    nodes: int

    def describe(self) -> str:
        return (f"{self.file} group {self.group} {self.engine} {self.role} {self.op} "
                f"bin {self.size_bin} {self.exposure}{' fused' if self.fused else ''}")


@dataclass
class Samples:
    """Samples as tensors, with where each came from.

    features [N, F] float64, roles [N] int64 (index in ``_C.prior_schema()['roles']``), labels
    [N] float64 (the measured log cost ratio to the default arm minus the analytic one), weights
    [N] float64 (0..1], analytic [N] float64 (the analytic log ratio: labels + analytic is the
    measured log ratio); per sample:
    ``files[i]`` (the policy file), ``state_ids[i]`` (index into ``states``) and ``arms[i]``.
    """
    features: torch.Tensor
    roles: torch.Tensor
    labels: torch.Tensor
    weights: torch.Tensor
    analytic: torch.Tensor
    files: List[str]
    state_ids: List[int]
    arms: List[str]
    states: List[StateKey]
    role_names: List[str]
    fingerprint: str = ""
    source_files: List[str] = field(default_factory=list)  # the policy files read

    def __len__(self) -> int:
        return len(self.state_ids)

    def subset(self, index: Sequence[int]) -> "Samples":
        """The samples at ``index`` (state ids keep their meaning)."""
        idx = torch.as_tensor(list(index), dtype=torch.int64)
        return Samples(self.features[idx], self.roles[idx], self.labels[idx], self.weights[idx],
                       self.analytic[idx], [self.files[i] for i in idx.tolist()],
                       [self.state_ids[i] for i in idx.tolist()],
                       [self.arms[i] for i in idx.tolist()], self.states, self.role_names,
                       self.fingerprint, self.source_files)


def representative_bytes(size_bin: int) -> int:
    """Bin b holds effective bytes [2^b, 2^(b+1)): its representative is round(2^(b+0.5))."""
    return int(round(2.0 ** (size_bin + 0.5)))


def sample_weight(samples: int) -> float:
    return min(samples, FULL_WEIGHT_SAMPLES) / FULL_WEIGHT_SAMPLES


def policy_files(paths: Iterable[PathLike]) -> List[str]:
    """The *.json files named by ``paths``: files as given, directories searched recursively
    (sorted, each file once). Raises PriorDataError naming a path that does not exist."""
    out: List[str] = []
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs.sort()
                found += [os.path.join(root, n) for n in names if n.lower().endswith(".json")]
            out += sorted(found)
        elif os.path.isfile(path):
            out.append(path)
        else:
            raise PriorDataError(f"data path {path!r} does not exist; accepted: a policy file "
                                 "(JSON written by save_policy or the simulator) or a "
                                 "directory searched recursively for them")
    seen = set()
    return [f for f in out if not (os.path.abspath(f) in seen or seen.add(os.path.abspath(f)))]


def data_fingerprint(paths: Iterable[PathLike]) -> str:
    """sha256 (hex) over the sorted contents of the files (directories: their *.json files):
    the same data gives the same fingerprint wherever it lies and whatever its file names."""
    digests = []
    for path in policy_files(paths):
        with open(path, "rb") as f:
            digests.append(hashlib.sha256(f.read()).hexdigest())
    h = hashlib.sha256()
    for d in sorted(digests):
        h.update(d.encode())
    return h.hexdigest()


def _read_policy(path: str) -> Tuple[Optional[dict], str]:
    """(the parsed file, "") for a policy file of this release's format, checked whole by
    policy_schema (a broken one raises its PolicyError, naming the file and key path); (None, why
    not) for a file that is not a policy file or of another format."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        return None, f"cannot be read ({e.strerror})"
    except UnicodeDecodeError:
        return None, "is not UTF-8 text"
    except (ValueError, RecursionError):
        return None, "is not valid JSON"
    fmt = data.get("format") if isinstance(data, dict) else None
    if not (isinstance(fmt, str) and fmt.startswith("dynamiccl-policy/")):
        return None, "is not a policy file (no \"format\": \"dynamiccl-policy/N\")"
    if fmt != FORMAT:
        return None, f"has format {fmt!r}; accepted: {FORMAT}"
    return validate(data, path), ""


def load_samples(paths: Iterable[PathLike], log: Optional[Callable[[str], None]] = None
                 ) -> Samples:
    """The samples of every policy file under ``paths`` (files, or directories searched
    recursively for *.json). Files that are not policy files are skipped, one line each to
    ``log`` (default: stderr). Raises PriorDataError for a missing path, PolicyError (from
    policy_schema, naming the file and key path) for a policy file that is broken."""
    if log is None:
        def log(line):
            print(line, file=sys.stderr)
    schema = _C.prior_schema()
    role_index = {r: i for i, r in enumerate(schema["roles"])}
    features: List[List[float]] = []
    roles, labels, weights, analytic, files, state_ids, arms = [], [], [], [], [], [], []
    states: List[StateKey] = []
    used: List[str] = []
    for path in policy_files(paths):
        data, why = _read_policy(path)
        if data is None:
            log(f"skipping {path}: {why}")
            continue
        used.append(path)
        for gname, group in data["groups"].items():
            size, nodes = group["group_size"], group["nodes"]
            for engine, snap in sorted(group["engines"].items()):
                for state in snap["states"]:
                    role = state["role"]
                    key = StateKey(path, gname, engine, role, state["op"], state["size_bin"],
                                   state["exposure"], state["fused"], size, nodes)
                    # (arm, samples, mean, analytic prior) of the arms measured; an analytic
                    # prior of 0: the engine had no estimate
                    measured = [(a["name"], a["samples"], float(a["mean_us"]),
                                 float(a["analytic_us"])) for a in state["arms"]
                                if a["samples"] > 0 and a["mean_us"] > 0 and a["analytic_us"] > 0]
                    default = [m for m in measured if m[0] == "default"]
                    if not default:
                        continue  # nothing to compare the arms with
                    state_id = len(states)
                    states.append(key)
                    base, base_prior = default[0][2], default[0][3]
                    for name, n, mean, prior in measured:
                        features.append(_C.prior_features(
                            engine, key.op, name, representative_bytes(key.size_bin), size,
                            nodes, key.exposure, key.fused, prior / base_prior))
                        roles.append(role_index[role])
                        analytic.append(math.log(prior / base_prior))
                        labels.append(math.log(mean / base) - analytic[-1])
                        weights.append(sample_weight(n))
                        files.append(path)
                        state_ids.append(state_id)
                        arms.append(name)
    n_features = len(schema["feature_names"])
    return Samples(
        features=torch.tensor(features, dtype=torch.float64).reshape(-1, n_features),
        roles=torch.tensor(roles, dtype=torch.int64),
        labels=torch.tensor(labels, dtype=torch.float64),
        weights=torch.tensor(weights, dtype=torch.float64),
        analytic=torch.tensor(analytic, dtype=torch.float64),
        files=files, state_ids=state_ids, arms=arms, states=states,
        role_names=list(schema["roles"]), fingerprint=data_fingerprint(used),
        source_files=used)
