"""PriorNet: a shared encoder of (state, arm) features and one head per role; PriorEnsemble:
several of them, the model that ships.

Each head says, for one row, log(cost(arm) / cost(default arm)) and the log of its uncertainty
(a log-normal's sigma). The heads are one Linear layer whose outputs are gathered by role, so the
module scripts to TorchScript cleanly; the C++ loader (csrc/prior/model.cpp) reads the metadata
attributes declared below and calls forward(x [N, F] float64, role [N] int64) -> [N, 2].
"""

from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .. import _C

__all__ = ["LOG_SIGMA_RANGE", "PriorEnsemble", "PriorModule", "PriorNet", "ensemble_size",
           "parameter_count"]

# log sigma is kept (smoothly) inside this range: sigma from 0.7% (a twin of the default: the
# same configuration, which ties in every job) to about 7.4x.
LOG_SIGMA_RANGE = (-5.0, 2.0)
MAX_PARAMETERS = 100_000


def refuse_over_cap(count: int, what: str, fewer: str) -> int:
    """``count`` when it is at most MAX_PARAMETERS, else a ValueError: "``what`` give(s) ``count``
    parameters", what is accepted, and ``fewer`` (what to reduce)."""
    if count > MAX_PARAMETERS:
        raise ValueError(f"{what} {count} parameters; accepted: at most {MAX_PARAMETERS} "
                         f"({fewer})")
    return count


class PriorModule(nn.Module):
    """What every model the backend loads carries: the metadata attributes the C++ loader checks
    (csrc/prior/model.cpp), declared once here so that torch.jit.script keeps them with these
    types (a model without them is refused)."""

    format: str
    schema_version: int
    catalog: str
    feature_names: List[str]
    roles: List[str]
    data_fingerprint: str
    log_sigma_min: float
    log_sigma_max: float

    @torch.jit.ignore
    def set_metadata(self, meta: dict) -> None:
        """Sets the attributes from ``meta`` (as metadata() gives them, or _C.prior_schema()
        with a data_fingerprint)."""
        self.format = str(meta["format"])
        self.schema_version = int(meta["schema_version"])
        self.catalog = str(meta["catalog"])
        self.feature_names = [str(n) for n in meta["feature_names"]]
        self.roles = [str(r) for r in meta["roles"]]
        self.data_fingerprint = str(meta["data_fingerprint"])
        self.log_sigma_min, self.log_sigma_max = LOG_SIGMA_RANGE

    @torch.jit.ignore
    def metadata(self) -> dict:
        """The metadata attributes, as a JSON-able dict."""
        return {"format": self.format, "schema_version": self.schema_version,
                "catalog": self.catalog, "feature_names": list(self.feature_names),
                "roles": list(self.roles), "data_fingerprint": self.data_fingerprint}


class PriorNet(PriorModule):
    """The learned prior's network, float64, with the metadata the C++ loader checks.

    ``hidden``: width of the shared encoder (Linear(F, hidden)-SiLU-Linear(hidden, hidden)-SiLU).
    ``schema``: ``_C.prior_schema()`` (the default): the format, versions, feature names and
    roles (head order) this build's backend accepts.
    """

    def __init__(self, hidden: int = 64, data_fingerprint: str = "",
                 schema: Optional[dict] = None):
        super().__init__()
        schema = _C.prior_schema() if schema is None else schema
        self.set_metadata(dict(schema, data_fingerprint=data_fingerprint))
        if not isinstance(hidden, int) or hidden < 1:
            raise ValueError(f"PriorNet: hidden={hidden!r}; accepted: an integer >= 1")
        n_features, n_roles = len(self.feature_names), len(self.roles)
        self.encoder = nn.Sequential(
            nn.Linear(n_features, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU())
        self.heads = nn.Linear(hidden, 2 * n_roles)  # role r: outputs 2r (log ratio), 2r+1
        # Inputs are standardized with the training data's statistics (set_input_scaling): the
        # features lie in [0, 1] but some (log2 bytes / 40) vary over a small part of it.
        self.register_buffer("input_shift", torch.zeros(n_features))
        self.register_buffer("input_scale", torch.ones(n_features))
        self.to(torch.float64)
        refuse_over_cap(parameter_count(self), f"PriorNet: hidden={hidden} gives",
                        "a smaller hidden")

    def forward(self, x: torch.Tensor, role: torch.Tensor) -> torch.Tensor:
        """x: [N, F] float64 features, role: [N] int64 head indices -> [N, 2]: (log ratio,
        log sigma)."""
        h = self.encoder((x.to(torch.float64) - self.input_shift) * self.input_scale)
        out = self.heads(h).view(h.shape[0], len(self.roles), 2)
        index = role.to(torch.int64).view(-1, 1, 1).expand(-1, 1, 2)
        picked = out.gather(1, index).squeeze(1)
        lo, hi = self.log_sigma_min, self.log_sigma_max
        log_sigma = lo + F.softplus(picked[:, 1] - lo)  # > lo, about the identity well above
        log_sigma = hi - F.softplus(hi - log_sigma)  # < hi
        return torch.stack([picked[:, 0], log_sigma], dim=1)

    @torch.jit.ignore
    def set_input_scaling(self, features: torch.Tensor) -> None:
        """Standardize inputs by the mean and spread of ``features`` [N, F] (the training
        rows); a feature constant there is only shifted."""
        with torch.no_grad():
            x = features.to(torch.float64)
            std = x.std(dim=0, unbiased=False) if x.shape[0] > 1 else torch.zeros(x.shape[1])
            self.input_shift.copy_(x.mean(dim=0) if x.shape[0] else torch.zeros(x.shape[1]))
            self.input_scale.copy_(torch.where(std > 1e-6, 1.0 / std.clamp_min(1e-6),
                                               torch.ones_like(std)))


class PriorEnsemble(PriorModule):
    """PriorNets trained alike from different initial weights, as one model of the same interface.

    A single network's sigma is what it learned of its training data's spread: far from that
    data (a group shape, size or role mix no past job had) it can be confidently wrong, and the
    learner skips probes on a confident prior. Where the members were taught the same thing they
    agree; elsewhere they drift apart, and their disagreement widens the sigma: per row the mean
    of the members' log ratios, and sigma^2 = the mean of their sigma^2 + the variance of their
    log ratios (a deep ensemble, Lakshminarayanan et al. 2017).
    """

    def __init__(self, members: List[PriorNet]):
        super().__init__()
        if not members:
            raise ValueError("PriorEnsemble: no members; accepted: at least one PriorNet")
        first = members[0]
        if any(m.metadata() != first.metadata() for m in members):
            raise ValueError("PriorEnsemble: the members' metadata differ; accepted: PriorNets "
                             "of one schema and one training data set")
        self.set_metadata(first.metadata())
        self.members = nn.ModuleList(members)
        refuse_over_cap(parameter_count(self), f"PriorEnsemble: {len(members)} members give",
                        "fewer members or a smaller hidden")

    def forward(self, x: torch.Tensor, role: torch.Tensor) -> torch.Tensor:
        outs: List[torch.Tensor] = []
        for member in self.members:
            outs.append(member(x, role))
        out = torch.stack(outs)  # [members, N, 2]
        mean = out[:, :, 0].mean(dim=0)
        var = torch.exp(2 * out[:, :, 1]).mean(dim=0) + (out[:, :, 0] - mean).pow(2).mean(dim=0)
        log_sigma = torch.clamp(0.5 * torch.log(var), max=self.log_sigma_max)
        return torch.stack([mean, log_sigma], dim=1)


def ensemble_size(hidden: int, members: int) -> int:
    """The parameters of a PriorEnsemble of ``members`` PriorNets of width ``hidden``; a
    ValueError naming both when that is more than MAX_PARAMETERS."""
    return refuse_over_cap(members * parameter_count(PriorNet(hidden=hidden)),
                           f"{members} members of hidden={hidden} give",
                           "fewer members or a smaller hidden")


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
