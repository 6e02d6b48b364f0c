"""The learned prior's trainer (`python -m dynamiccl_pg prior`): samples from policy files, a
model that recovers a planted rule, the same predictions in Python, TorchScript and the backend's
C++ loader, the loader's refusals, and the command end to end."""

import json
import math
import os
import statistics
import warnings
import zipfile

import pytest
import torch

from dynamiccl_pg import _C
from dynamiccl_pg.__main__ import main
from dynamiccl_pg.prior import PriorNet, load_samples, train
from dynamiccl_pg.policy_schema import PolicyError
from dynamiccl_pg.prior.data import PriorDataError, data_fingerprint, representative_bytes
from dynamiccl_pg.prior.model import MAX_PARAMETERS, PriorEnsemble, parameter_count
from dynamiccl_pg.prior.train import evaluate, load_scripted, predict, save, split

pytestmark = pytest.mark.timeout(300)

SCHEMA = _C.prior_schema()
DP = SCHEMA["roles"].index("dp")
BINS = range(4, 28)
BOUNDARY = 16  # the planted rule flips here


def planted(arm, size_bin):
    """Cost over the default's: ring 0.5x and rd 2x for big messages, the reverse below."""
    big = size_bin >= BOUNDARY
    return {"default": 1.0, "ring": 0.5 if big else 2.0, "rd": 2.0 if big else 0.5}[arm]


def arm(name, mean_us, samples=16, analytic_us=100.0):
    return {"name": name, "samples": samples, "mean_us": mean_us, "m2": 1.0,
            "analytic_us": analytic_us, "eliminated": False, "step_adopted": False,
            "step_rejected": False}


def state(arms, size_bin, role="dp", op="allreduce"):
    return {"role": role, "op": op, "size_bin": size_bin, "exposure": "exposed",
            "fused": False, "incumbent": "default", "converged": True, "arms": arms}


def policy(states, fmt="dynamiccl-policy/4", nodes=1, group_size=4, engine="cpu"):
    group = {"group_size": group_size, "group_desc": "default_pg",
             "engines": {engine: {"states": states}}}
    if nodes is not None:
        group["nodes"] = nodes
    return {"format": fmt, "fingerprint": {"world_size": group_size}, "groups": {"0": group}}


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def planted_files(folder, jobs=4):
    """One policy file per job, every size bin, the planted costs with 3% noise."""
    g = torch.Generator().manual_seed(7)
    for job in range(jobs):
        states = []
        for b in BINS:
            noise = torch.randn(3, generator=g, dtype=torch.float64).mul(0.03).exp().tolist()
            states.append(state([arm(a, 100 * 2 ** (b / 4) * planted(a, b) * n)
                                 for a, n in zip(("default", "ring", "rd"), noise)], b))
        write(folder / f"job{job}" / "policy.json", policy(states))
    return folder


def rows(arms, size_bin):
    return torch.tensor([_C.prior_features("cpu", "allreduce", a, representative_bytes(size_bin),
                                           4) for a in arms], dtype=torch.float64)


@pytest.fixture(scope="module")
def planted_data(tmp_path_factory):
    return planted_files(tmp_path_factory.mktemp("planted"))


@pytest.fixture(scope="module")
def trained(planted_data):
    samples = load_samples([planted_data])
    return samples, train(samples, epochs=300, seed=0, progress=False, log=None)


def test_prior_samples_from_policy_files(tmp_path, capsys):
    write(tmp_path / "a.json", policy([state([arm("default", 100.0), arm("ring", 50.0, 4),
                                              arm("rd", 80.0, 0)], 10)]))
    write(tmp_path / "b.json", policy([state([arm("default", 100.0, analytic_us=40.0),
                                              arm("tree", 200.0, analytic_us=60.0)], 20),
                                       state([arm("default", 0.0, 0), arm("ring", 9.0)], 21)],
                                      nodes=2))
    write(tmp_path / "sub" / "other.json", {"name": "not a policy"})
    write(tmp_path / "old.json", policy([], fmt="dynamiccl-policy/3"))
    (tmp_path / "notes.txt").write_text("ignored: not JSON")
    s = load_samples([tmp_path])
    skipped = capsys.readouterr().err.splitlines()
    assert len(skipped) == 2 and all(line.startswith("skipping ") for line in skipped)
    assert "other.json: is not a policy file" in skipped[1]
    assert "old.json: has format 'dynamiccl-policy/3'" in skipped[0]
    # a: default and ring (rd has no samples); b: default and tree (the second state's
    # default was never measured: nothing to compare with)
    assert s.arms == ["default", "ring", "default", "tree"]
    # The label is the measured log ratio's departure from the analytic one (tree: 2x measured,
    # 1.5x by the analytic prior).
    assert s.labels.tolist() == pytest.approx([0.0, math.log(0.5), 0.0, math.log(2.0 / 1.5)])
    assert s.analytic.tolist() == pytest.approx([0.0, 0.0, 0.0, math.log(1.5)])
    assert s.weights.tolist() == [1.0, 0.25, 1.0, 1.0]
    assert s.roles.tolist() == [DP] * 4 and s.state_ids == [0, 0, 1, 1]
    assert [os.path.basename(f) for f in s.files] == ["a.json"] * 2 + ["b.json"] * 2
    assert s.features[0].tolist() == _C.prior_features("cpu", "allreduce", "default",
                                                       round(2 ** 10.5), 4, 1)
    assert s.features[3].tolist() == _C.prior_features("cpu", "allreduce", "tree",
                                                       round(2 ** 20.5), 4, 2, "exposed", False,
                                                       1.5)
    # the fingerprint is of the contents, not of the names
    copy = write(tmp_path / "elsewhere" / "renamed.json",
                 json.loads((tmp_path / "b.json").read_text()))
    assert data_fingerprint([tmp_path / "b.json"]) == data_fingerprint([copy])
    assert data_fingerprint([tmp_path / "a.json"]) != data_fingerprint([copy])


def test_prior_samples_refuse_unusable_policy_files(tmp_path):
    bad = write(tmp_path / "bad.json", policy([state([arm("default", 1.0), arm("nope", 1.0)], 3)]))
    with pytest.raises(PolicyError, match=r"bad\.json.*states\[0\]\.arms\[1\].*'nope'"):
        load_samples([bad])
    with pytest.raises(PriorDataError, match=r"'missing-dir' does not exist; accepted"):
        load_samples(["missing-dir"])


def test_prior_split_holds_out_whole_files_else_states(trained, tmp_path):
    samples, result = trained
    train_idx, val_idx, by = split(samples, 0.25, seed=3)
    assert by == "file" and val_idx
    assert not {samples.files[i] for i in train_idx} & {samples.files[i] for i in val_idx}
    assert sorted(train_idx + val_idx) == list(range(len(samples)))
    one = load_samples([sorted(set(samples.files))[0]])
    train_idx, val_idx, by = split(one, 0.25, seed=3)
    assert by == "state" and val_idx
    assert not {one.state_ids[i] for i in train_idx} & {one.state_ids[i] for i in val_idx}
    assert result.summary["held_out_by"] == "file" and result.summary["val_samples"] > 0


@torch.no_grad()
def test_prior_recovers_a_planted_rule(trained):
    _, result = trained
    model = result.model
    assert sum(p.numel() for p in model.parameters()) <= 100_000
    for b in BINS:
        out = model(rows(["ring", "rd"], b), torch.tensor([DP, DP]))
        ring, rd = out[:, 0].exp().tolist()
        if abs(b + 0.5 - BOUNDARY) > 2:  # a smooth model blurs the step next to it
            assert ring == pytest.approx(planted("ring", b), rel=0.15), b
            assert rd == pytest.approx(planted("rd", b), rel=0.15), b
            assert (ring < rd) == (b >= BOUNDARY), b
        assert out[:, 1].exp().max() < 1.0  # confident where the data is
    default = model(rows(["default"], 22), torch.tensor([DP]))
    assert abs(float(default[0, 0])) < 0.1


@torch.no_grad()
def test_prior_ensemble_widens_its_sigma_off_its_training_data(trained):
    # Trained on CPU all-reduces of size bins 4..27: there the members agree; on an op and a size
    # no job had they drift apart, and the sigma the learner trusts widens with them.
    _, result = trained
    model = result.model
    assert len(model.members) == result.summary["members"] == 4

    def sigma(arm, size_bin, op="allreduce"):
        row = _C.prior_features("cpu", op, arm, representative_bytes(size_bin), 4)
        out = model(torch.tensor([row], dtype=torch.float64), torch.tensor([DP]))
        return float(out[0, 1].exp())

    # Away from the planted step (where a smooth model blurs, and says so).
    known = statistics.median(sigma(a, b) for a in ("ring", "rd") for b in BINS
                              if abs(b + 0.5 - BOUNDARY) > 3)
    assert known < 0.1
    assert sigma("ring", 40) > 2 * known  # 1 TiB
    assert sigma("ring", 20, op="allgather") > 2 * known


def test_prior_training_is_deterministic(trained):
    samples, _ = trained
    a, b, c = (train(samples, epochs=5, seed=s, progress=False, log=None).model.state_dict()
               for s in (1, 1, 2))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_prior_save_load_round_trip(trained, tmp_path):
    samples, result = trained
    path = str(tmp_path / "prior.pt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        save(result.model, path, {"training": result.summary})
    assert not [w for w in caught if "deprecated" in str(w.message)]
    python = predict(result.model, samples)
    scripted, meta = load_scripted(path)
    with torch.no_grad():
        jit = scripted(samples.features, samples.roles)
    assert torch.allclose(python, jit, rtol=0, atol=1e-12)
    prior = _C.PriorModel(path)
    cpp = torch.tensor(prior.predict(samples.features.tolist(), samples.roles.tolist()),
                       dtype=torch.float64)
    assert (cpp[:, 0] - python[:, 0]).abs().max() <= 1 / 128 + 1e-12  # rounded to 1/64
    assert (cpp[:, 1] - python[:, 1]).abs().max() <= 1 / 32 + 1e-12  # rounded to 1/16
    for key in ("format", "schema_version", "catalog", "feature_names", "roles"):
        assert prior.metadata[key] == SCHEMA[key] == meta[key]
    assert prior.metadata["data_fingerprint"] == samples.fingerprint == meta["data_fingerprint"]
    assert meta["training"]["epochs"] == 300 and "dp" in meta["training"]["validation"]
    rows_ = evaluate(prior, samples)
    assert rows_["dp"]["samples"] == len(samples) and rows_["dp"]["top1"] > 0.9


class _NaNPrior(PriorNet):
    def forward(self, x: torch.Tensor, role: torch.Tensor) -> torch.Tensor:
        return torch.full([x.shape[0], 2], float("nan"), dtype=torch.float64)


def _changed(attr, value):
    def make(path):
        model = PriorNet(hidden=8)
        setattr(model, attr, value)
        save(model, path)
    return make


def _nan(path):
    save(_NaNPrior(hidden=8), path)


def _corrupt(path):
    save(PriorNet(hidden=8), path)
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def _not_a_model(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("hello.txt", "a zip, not TorchScript")


REFUSALS = [
    ("schema version", _changed("schema_version", SCHEMA["schema_version"] + 1),
     f"feature schema version {SCHEMA['schema_version'] + 1}, this build accepts "
     f"{SCHEMA['schema_version']}"),
    ("catalog", _changed("catalog", "0123456789abcdef"),
     f"arm catalog 0123456789abcdef, this build's is {SCHEMA['catalog']}"),
    ("format", _changed("format", "dynamiccl-prior/0"), "format 'dynamiccl-prior/0'"),
    ("roles", _changed("roles", list(reversed(SCHEMA["roles"]))), "its roles"),
    ("feature names", _changed("feature_names", SCHEMA["feature_names"][:-1] + ["x"]),
     "feature names differ"),
    ("corrupt file", _corrupt, "not a TorchScript archive"),
    ("zip, not TorchScript", _not_a_model, "not a TorchScript archive"),
    ("missing file", None, "cannot be opened"),
    ("NaN outputs", _nan, r"outputs are not finite"),
]


@pytest.mark.parametrize("make,problem", [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_prior_loader_refusals(tmp_path, make, problem):
    path = str(tmp_path / "prior.pt")
    if make is not None:
        make(path)
    with pytest.raises(ValueError, match=rf"prior model '{path}': .*{problem}"):
        _C.PriorModel(path)


def test_prior_cli_train_and_eval(planted_data, tmp_path, capsys):
    out, png = tmp_path / "prior.pt", tmp_path / "prior.png"
    assert main(["prior", "train", "--data", str(planted_data), "--out", str(out), "--epochs",
                 "40", "--seed", "1", "--plot", str(png), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "held out by file" in text and "validation loss per role" in text
    table = text.split("validation loss per role")[1].splitlines()
    assert table[1].split()[:2] == ["role", "samples"] and table[2].split()[0] == "dp"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    meta = load_scripted(str(out))[1]
    assert meta["training"]["command"].startswith("python -m dynamiccl_pg prior train --data")
    assert _C.PriorModel(str(out)).metadata["roles"] == SCHEMA["roles"]

    assert main(["prior", "eval", "--model", str(out), "--data", str(planted_data)]) == 0
    text = capsys.readouterr().out
    assert "note: this is the model's training data" in text
    header, dp = [line for line in text.splitlines() if line.startswith(("role ", "dp "))]
    assert "top-1" in header and "mean |log err|" in header
    assert dp.split()[1] == str(4 * len(BINS) * 3)  # samples: 4 jobs, every bin, 3 arms


def test_prior_ensemble_refuses_more_parameters_than_its_cap():
    one = parameter_count(PriorNet())
    members = MAX_PARAMETERS // one + 1
    with pytest.raises(ValueError, match=f"{members} members give {members * one} parameters; "
                                         f"accepted: at most {MAX_PARAMETERS}"):
        PriorEnsemble([PriorNet() for _ in range(members)])


@pytest.mark.parametrize("argv,words", [
    (["train", "--data", "{tmp}/missing", "--out", "{tmp}/p.pt"],
     ["{tmp}/missing", "does not exist", "accepted"]),
    (["train", "--data", "{tmp}/empty", "--out", "{tmp}/p.pt"],
     ["no samples found", "{tmp}/empty", "accepted"]),
    (["train", "--data", "{tmp}/empty", "--out", "{tmp}/p.pt", "--epochs", "0"],
     ["--epochs 0 is not accepted", "accepted: integers 1.."]),
    (["train", "--data", "{tmp}/empty", "--out", "{tmp}/p.pt", "--members", "0"],
     ["--members 0 is not accepted", "accepted: integers >= 1"]),
    (["train", "--data", "{tmp}/empty", "--out", "{tmp}/p.pt", "--members", "40"],
     ["--members 40", "parameters; accepted: at most 100000"]),
    (["eval", "--model", "{tmp}/none.pt", "--data", "{tmp}/empty"],
     ["prior model '{tmp}/none.pt'", "cannot be opened"]),
], ids=["missing data path", "no samples", "bad epochs", "no members", "too many members",
        "missing model"])
def test_prior_cli_bad_input(tmp_path, capsys, argv, words):
    write(tmp_path / "empty" / "not_policy.json", [1, 2])
    assert main(["prior"] + [a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("error: ") == 1
    for w in words:
        assert w.format(tmp=tmp_path) in err
    assert not (tmp_path / "p.pt").exists()
