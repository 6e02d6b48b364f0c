"""Training, saving and evaluating the learned prior (a PriorEnsemble of PriorNets).

Deterministic: float64 throughout, every random choice (initial weights, the held-out split,
the batch order) drawn from ``seed``. The loss is the Gaussian negative log likelihood of the
labels under (log ratio, log sigma), weighted per sample. Part of the data is held out to say how
well the model generalizes: whole files (jobs) when there are at least two, else whole states.
"""

from __future__ import annotations

import copy
import json
import math
import warnings
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import torch

from .. import _C
from .data import Samples
from .model import PriorEnsemble, PriorNet, ensemble_size, parameter_count

__all__ = ["TrainResult", "evaluate", "gaussian_nll", "plot_heldout", "predict", "save",
           "split", "train", "validation_table"]

# torch.jit.script/save/load warn (FutureWarning) that TorchScript is deprecated; the backend's
# loader is TorchScript's, so the warning says nothing a user of this command can act on.
_DEPRECATION = r"`torch\.jit\.\w+` is deprecated"


@dataclass
class TrainResult:
    """The trained model, a JSON-able summary of the run, and which samples were held out."""
    model: PriorEnsemble
    summary: dict
    train_index: List[int]
    val_index: List[int]


def gaussian_nll(out: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor,
                 reduce: bool = True, beta: float = 0.0) -> torch.Tensor:
    """Weighted Gaussian NLL of ``labels`` under out[:, 0] (mean) and out[:, 1] (log sigma),
    without the constant 0.5 log(2 pi); the weighted mean when ``reduce``.

    ``beta`` > 0: each sample's term is scaled by sigma^(2 beta), held constant (beta-NLL,
    Seitzer et al. 2022), so that a sample the model calls uncertain still pulls the mean; with
    plain NLL (beta 0) a model may settle on predicting 0 with a wide sigma."""
    mu, log_sigma = out[:, 0], out[:, 1]
    per = 0.5 * ((labels - mu) * torch.exp(-log_sigma)) ** 2 + log_sigma
    if beta:
        per = per * torch.exp(2 * beta * log_sigma).detach()
    if not reduce:
        return per
    return (per * weights).sum() / weights.sum().clamp_min(1e-12)


def split(samples: Samples, val_fraction: float, seed: int):
    """(train indices, validation indices, "file" or "state"): whole files held out when the
    samples come from >= 2 files, else whole states; nothing held out when there is one state
    or ``val_fraction`` is 0."""
    files = sorted(set(samples.files))
    by, units = ("file", files) if len(files) >= 2 else ("state", sorted(set(samples.state_ids)))
    unit_of = samples.files if by == "file" else samples.state_ids
    if len(units) < 2 or val_fraction <= 0:
        return list(range(len(samples))), [], "none"
    n_val = min(len(units) - 1, max(1, int(round(val_fraction * len(units)))))
    g = torch.Generator().manual_seed(seed + 1)
    held = {units[i] for i in torch.randperm(len(units), generator=g)[:n_val].tolist()}
    train_idx = [i for i, u in enumerate(unit_of) if u not in held]
    val_idx = [i for i, u in enumerate(unit_of) if u in held]
    return train_idx, val_idx, by


def predict(model: torch.nn.Module, samples: Samples) -> torch.Tensor:
    """[N, 2] (log ratio, log sigma) of the Python model, without gradients."""
    was = model.training
    model.eval()
    with torch.no_grad():
        out = model(samples.features, samples.roles)
    model.train(was)
    return out


def validation_table(model: torch.nn.Module, samples: Samples) -> Dict[str, dict]:
    """Per role with samples: samples, weighted NLL, mean |log error| (and 'all')."""
    if len(samples) == 0:
        return {}
    out = predict(model, samples)
    nll = gaussian_nll(out, samples.labels, samples.weights, reduce=False)
    err = (out[:, 0] - samples.labels).abs()
    rows = {}
    masks = [(name, samples.roles == r) for r, name in enumerate(samples.role_names)]
    for name, mask in masks + [("all", torch.ones_like(samples.labels, dtype=torch.bool))]:
        if not bool(mask.any()):
            continue
        w = samples.weights[mask]
        rows[name] = {"samples": int(mask.sum()),
                      "nll": float((nll[mask] * w).sum() / w.sum().clamp_min(1e-12)),
                      "mean_abs_log_error": float(err[mask].mean()),
                      "mean_sigma": float(out[mask, 1].exp().mean())}
    return rows


def format_loss_table(rows: Dict[str, dict]) -> str:
    lines = [f"{'role':<9} {'samples':>8} {'NLL':>9} {'mean |log err|':>15} {'mean sigma':>11}"]
    for role, r in rows.items():
        lines.append(f"{role:<9} {r['samples']:>8} {r['nll']:>9.4f} "
                     f"{r['mean_abs_log_error']:>15.4f} {r['mean_sigma']:>11.4f}")
    return "\n".join(lines)


def _epoch(model: PriorNet, opt: torch.optim.Optimizer, tr: Samples, va: Samples,
           g: torch.Generator, batch: int, beta: float):
    """One pass over the training samples in a random order; (train loss, validation loss:
    plain NLL, NaN without validation samples)."""
    model.train()
    n = len(tr)
    perm = torch.randperm(n, generator=g)
    total, weight = 0.0, 0.0
    for start in range(0, n, batch):
        idx = perm[start:start + batch]
        w = tr.weights[idx]
        loss = gaussian_nll(model(tr.features[idx], tr.roles[idx]), tr.labels[idx], w, beta=beta)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item() * float(w.sum())
        weight += float(w.sum())
    val_loss = math.nan
    if len(va):
        val_loss = float(gaussian_nll(predict(model, va), va.labels, va.weights))
    return total / max(weight, 1e-12), val_loss


def _train_member(tr: Samples, va: Samples, seed: int, epochs: int, hidden: int, lr: float,
                  batch: int, weight_decay: float, beta: float, keep_best: bool,
                  fingerprint: str, bar):
    """One PriorNet from initial weights drawn from ``seed``; (model, its best epoch, its last
    training loss). Advances ``bar`` by one per epoch."""
    torch.manual_seed(seed)  # the initial weights
    model = PriorNet(hidden=hidden, data_fingerprint=fingerprint)
    model.set_input_scaling(tr.features)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    g = torch.Generator().manual_seed(seed)
    best, best_loss, best_epoch = None, math.inf, epochs
    train_loss = math.nan
    for epoch in range(1, epochs + 1):
        train_loss, val_loss = _epoch(model, opt, tr, va, g, batch, beta)
        if keep_best and len(va) and val_loss < best_loss:
            best, best_loss, best_epoch = copy.deepcopy(model.state_dict()), val_loss, epoch
        bar.update()
        bar.set_postfix(train=f"{train_loss:.4f}", val=f"{val_loss:.4f}", refresh=False)
    if best is not None:
        model.load_state_dict(best)
    model.eval()
    return model, best_epoch, train_loss


def train(samples: Samples, epochs: int = 300, seed: int = 0, *, hidden: int = 64,
          members: int = 4, lr: float = 1e-2, batch_size: int = 256, weight_decay: float = 0.0,
          beta: float = 0.5, threads: Optional[int] = 1,
          val_fraction: float = 0.2, keep_best: bool = True, progress: bool = True,
          log: Optional[Callable[[str], None]] = print) -> TrainResult:
    """Trains a PriorEnsemble of ``members`` PriorNets on ``samples``; the same samples and
    arguments give the same model.

    Holds out ``val_fraction`` of the files (or states, with one file), the same for every
    member, prints the ensemble's validation loss per role at the end through ``log`` (None:
    silent) and, when ``keep_best``, keeps each member's weights of the epoch with its lowest
    validation loss. ``progress``: a tqdm bar on stderr. ``threads``: torch's intra-op threads
    while training (restored after; None: as they are). The network is small: one thread is
    faster than several, which wait on each other for every small operation, many times over on
    a busy machine.
    """
    for name, value in (("epochs", epochs), ("members", members)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r}; accepted: an integer >= 1")
    if len(samples) == 0:
        raise ValueError("no samples to train on; accepted: policy files with states whose "
                         "default arm and at least one other arm were measured")
    say = log or (lambda _line: None)
    train_idx, val_idx, by = split(samples, val_fraction, seed)
    tr, va = samples.subset(train_idx), samples.subset(val_idx)
    n = len(tr)
    batch = max(1, min(batch_size, n))
    count = ensemble_size(hidden, members)  # checked before any training
    say(f"training on {n} samples ({len(set(tr.state_ids))} states), validating on {len(va)} "
        f"({len(set(va.state_ids))} states; held out by {by}), {members} members, {count} "
        f"parameters, {epochs} epochs, seed {seed}")
    from tqdm import tqdm

    bar = tqdm(total=members * epochs, desc="prior train", unit="epoch", disable=not progress,
               dynamic_ncols=True, leave=False)
    saved_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    nets, best_epochs, train_losses = [], [], []
    try:
        for k in range(members):
            net, best_epoch, train_loss = _train_member(
                tr, va, seed + 7919 * k, epochs, hidden, lr, batch, weight_decay, beta,
                keep_best, samples.fingerprint, bar)
            nets.append(net)
            best_epochs.append(best_epoch)
            train_losses.append(train_loss)
    finally:
        bar.close()
        torch.set_num_threads(saved_threads)
    model = PriorEnsemble(nets)
    model.eval()
    val_rows = validation_table(model, va)
    if val_rows:
        say(f"validation loss per role (members' best epochs {best_epochs}):")
        say(format_loss_table(val_rows))
    else:
        say("no validation data: nothing held out (one state only, or a validation share of 0)")
    summary = {
        "epochs": epochs, "seed": seed, "hidden": hidden, "members": members, "lr": lr,
        "batch_size": batch, "weight_decay": weight_decay, "beta": beta,
        "parameters": parameter_count(model),
        "held_out_by": by, "train_samples": len(tr), "val_samples": len(va),
        "train_states": len(set(tr.state_ids)), "val_states": len(set(va.state_ids)),
        "files": list(samples.source_files),
        "val_files": sorted(set(va.files)) if by == "file" else [],
        "final_train_loss": train_losses, "best_epoch": best_epochs,
        "validation": val_rows, "torch": torch.__version__.split("+")[0],
    }
    return TrainResult(model, summary, train_idx, val_idx)


def save(model: torch.nn.Module, path: str, metadata_extra: Optional[dict] = None) -> None:
    """Writes ``model`` (a PriorEnsemble or a PriorNet) as TorchScript (what ``_C.PriorModel``
    loads), with its metadata and ``metadata_extra`` (e.g. the training summary) as JSON in the
    archive's metadata file."""
    schema = _C.prior_schema()
    meta = dict(model.metadata())
    if metadata_extra:
        meta.update(metadata_extra)
    text = json.dumps(_clean(meta), indent=1, sort_keys=True)
    model.eval()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_DEPRECATION, category=FutureWarning)
        scripted = torch.jit.script(model)
        torch.jit.save(scripted, path, _extra_files={schema["metadata_file"]: text})


def load_scripted(path: str):
    """``torch.jit.load(path)`` without TorchScript's deprecation warning, and the archive's
    metadata (the JSON ``save`` wrote)."""
    files = {_C.prior_schema()["metadata_file"]: ""}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_DEPRECATION, category=FutureWarning)
        module = torch.jit.load(path, map_location="cpu", _extra_files=files)
    text = next(iter(files.values()))
    return module, (json.loads(text) if text else {})


def _clean(obj):
    """JSON has no NaN/inf: null instead."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def evaluate(prior, samples: Samples) -> Dict[str, dict]:
    """Scores ``prior`` (a ``_C.PriorModel``: the backend's own loader and rounding) on
    ``samples``. Per role with samples, and 'all': samples, states, mean |log error|, top-1
    (over states with >= 2 measured arms: how often the model's cheapest arm is the measured
    cheapest) and regret (geometric mean over those states of the measured cost of the model's
    pick over the measured best)."""
    if len(samples) == 0:
        return {}
    est = prior.predict(samples.features.tolist(), samples.roles.tolist())
    # Whole log ratios (the model predicts the residual over the analytic one).
    analytic = samples.analytic.tolist()
    pred = [e[0] + a for e, a in zip(est, analytic)]
    labels = [y + a for y, a in zip(samples.labels.tolist(), analytic)]
    per_state: Dict[int, List[int]] = {}
    for i, s in enumerate(samples.state_ids):
        per_state.setdefault(s, []).append(i)
    rows: Dict[str, dict] = {}
    names = samples.role_names
    for role in list(range(len(names))) + [None]:
        idx = [i for i, r in enumerate(samples.roles.tolist()) if role is None or r == role]
        if not idx:
            continue
        states = sorted({samples.state_ids[i] for i in idx})
        ranked = [per_state[s] for s in states if len(per_state[s]) >= 2]
        hits, regret = 0, 0.0
        for members in ranked:
            pick = min(members, key=lambda i: pred[i])  # ties: the first listed
            best = min(members, key=lambda i: labels[i])
            hits += labels[pick] == labels[best]
            regret += labels[pick] - labels[best]
        rows["all" if role is None else names[role]] = {
            "samples": len(idx), "states": len(states), "ranked_states": len(ranked),
            "mean_abs_log_error": sum(abs(pred[i] - labels[i]) for i in idx) / len(idx),
            "top1": hits / len(ranked) if ranked else math.nan,
            "regret": math.exp(regret / len(ranked)) if ranked else math.nan,
        }
    return rows


def format_eval_table(rows: Dict[str, dict]) -> str:
    lines = [f"{'role':<9} {'samples':>8} {'states':>7} {'mean |log err|':>15} "
             f"{'top-1':>13} {'regret':>7}"]
    for role, r in rows.items():
        top1 = (f"{100 * r['top1']:5.1f}% of {r['ranked_states']:<4}" if r["ranked_states"]
                else f"{'-':>13}")
        regret = f"{r['regret']:.3f}x" if r["ranked_states"] else "-"
        lines.append(f"{role:<9} {r['samples']:>8} {r['states']:>7} "
                     f"{r['mean_abs_log_error']:>15.4f} {top1:>13} {regret:>7}")
    return "\n".join(lines)


def plot_heldout(model: torch.nn.Module, samples: Samples, path: str,
                 index: Optional[Sequence[int]] = None, title: str = "held-out data") -> None:
    """A PNG of predicted vs measured cost ratio (to the default arm), log-log, with the
    diagonal, one colour per role, over ``samples`` at ``index`` (default: all)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    sub = samples if index is None else samples.subset(index)
    out = predict(model, sub)
    measured = (sub.labels + sub.analytic).exp().tolist()
    predicted = (out[:, 0] + sub.analytic).exp().tolist()
    fig, ax = plt.subplots(figsize=(5.6, 5.2), dpi=110)
    for r, name in enumerate(sub.role_names):
        pts = [(m, p) for m, p, rr in zip(measured, predicted, sub.roles.tolist()) if rr == r]
        if pts:
            ax.scatter([m for m, _ in pts], [p for _, p in pts], s=14, alpha=0.7,
                       label=f"{name} ({len(pts)})")
    values = measured + predicted or [1.0]
    lo, hi = min(values + [1.0]) / 1.25, max(values + [1.0]) * 1.25
    ax.plot([lo, hi], [lo, hi], color="0.4", lw=1, ls="--", label="predicted = measured")
    ticks = matplotlib.ticker.FuncFormatter(lambda v, _pos: f"{v:g}x")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ticks)
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured cost / default arm's cost")
    ax.set_ylabel("predicted cost / default arm's cost")
    ax.set_title(f"learned prior on {title} ({len(sub)} samples)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
