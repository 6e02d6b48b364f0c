"""The host-side parts of the GPU proof (benchmarks/gpu/run.sh): the script parses, refuses clearly
without a GPU, judges what NCCL ran against the forced arm, and reports every stage honestly
(missing, timed out, failed, or its figures)."""

import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "gpu"))
import gpu_proof  # noqa: E402


def test_run_script_parses():
    subprocess.run(["bash", "-n", os.path.join(ROOT, "benchmarks", "gpu", "run.sh")], check=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_preflight_without_a_gpu_says_so(tmp_path):
    proc = subprocess.run([sys.executable, gpu_proof.__file__, "preflight", "--out",
                           str(tmp_path / "p.json")], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "no CUDA device is visible" in proc.stderr
    assert not (tmp_path / "p.json").exists()


def test_two_rank_stages_need_a_working_way_first(tmp_path):
    args = type("A", (), {"multi_rank": str(tmp_path / "multi_rank.json")})
    with pytest.raises(gpu_proof.StageSkipped, match="stage multi_rank found no way"):
        gpu_proof._two_ranks_env(args)
    (tmp_path / "multi_rank.json").write_text(json.dumps({"working": "NCCL_HOSTID per rank"}))
    way, env = gpu_proof._two_ranks_env(args)
    assert way == "NCCL_HOSTID per rank" and env(1)["NCCL_HOSTID"] != env(0)["NCCL_HOSTID"]


def row(ran, unavailable=0):
    return {"ran": ran, "unavailable": unavailable}


def test_arm_verdict_compares_what_ran_with_the_forced_arm():
    assert gpu_proof.arm_verdict("tree/LL", row([("tree", "LL", 2)])) == "ran as forced"
    assert gpu_proof.arm_verdict("ring/Simple/c4", row([("ring", "Simple", 4)])) == "ran as forced"
    assert gpu_proof.arm_verdict("ring/Simple/c4",
                                 row([("ring", "Simple", 8)])).startswith("DIFFERENT")
    assert gpu_proof.arm_verdict("tree/LL", row([("ring", "LL", 2)])) == "DIFFERENT: ring/LL/c2"
    assert gpu_proof.arm_verdict("tree/LL", row([])) == "NO PROFILER RECORDS"
    assert gpu_proof.arm_verdict("nvls/Simple", row([], 1)).startswith("unavailable here")


def test_report_states_every_stage_honestly():
    ok = {"ok": {"checks": {"broadcast": "ok", "reduce": "MISMATCH"},
                 "allreduce": {"4KiB": {"nccl": 20.0, "off": 20.1, "learn": 20.2},
                               "64MiB": {"error": "OutOfMemoryError: x"}},
                 "learn_phases": ["settled"], "nccl_plugin": {"loaded_by_nccl": True}}}
    all_ok = {"ok": dict(ok["ok"], checks={"broadcast": "ok", "reduce": "ok"})}
    stages = {
        "preflight": {"device": "NVIDIA H100", "gpus": 1, "torch": "2.11.0", "cuda": "13.0",
                      "nccl": "2.28.9", "date": "2026-11-24"},
        "collectives": {"world": 1, "ranks": [ok]},
        "ddp": {"timed_out": 300},
        "multi_rank": {"world": 2, "working": "NCCL_HOSTID per rank",
                       "ways": {"plain": [{"error": "DistBackendError: Duplicate GPU detected"},
                                          {"error": "x"}],
                                "NCCL_MULTI_RANK_GPU_ENABLE=1": [ok, ok],  # a check failed
                                "NCCL_HOSTID per rank": [all_ok, all_ok]}},
        "arm_sweep": {"world": 2, "way": "NCCL_HOSTID per rank", "ranks": [
            {"ok": {"profiler_loaded_by_nccl": True, "rows": [
                {"arm": "tree/LL", "bytes": 65536, "us": 30.0, "kernel_us": 20.0,
                 "ran": [["tree", "LL", 2]], "applied": 21, "unavailable": 0}]}},
            {"ok": {}}]},
    }
    text = gpu_proof.report(stages)
    assert "NVIDIA H100 (x1), torch 2.11.0, CUDA 13.0, NCCL 2.28.9" in text
    assert "| reduce | MISMATCH |" in text and "| broadcast | ok |" in text
    assert "| 4KiB | 20.0 µs | 20.1 µs | 20.2 µs | 1.005 | 1.010 |" in text, text
    assert "| 64MiB | failed: OutOfMemoryError: x |" in text
    assert "timed out after 300 s" in text
    assert "- plain: refused: DistBackendError: Duplicate GPU detected" in text
    assert "- NCCL_MULTI_RANK_GPU_ENABLE=1: refused: reduce: MISMATCH" in text
    assert "- NCCL_HOSTID per rank: works" in text
    assert "| tree/LL | 65536 | 30.0 | 20.0 | ran as forced |" in text
    assert text.rstrip().endswith("not run")  # (e) has no result


def test_a_stage_that_cannot_run_records_why(tmp_path):
    """(d) and (e) need stage (c)'s working way; without one they write why, and the report
    says it, instead of leaving no result behind."""
    out = tmp_path / "arm_sweep.json"
    assert gpu_proof.main(["arm_sweep", "--out", str(out),
                           "--multi-rank", str(tmp_path / "missing.json")]) == 0
    result = json.loads(out.read_text())
    assert "stage multi_rank found no way" in result["skipped"]
    assert "skipped: needs two ranks on this GPU" in gpu_proof.report({"arm_sweep": result})


CLUSTER = {"name": "overlap_dry_run", "seed": 5, "steps": 10,
           "topology": {"nodes": 2, "gpus_per_node": 1, "gpu": "ampere",
                        "intra": {"type": "nvlink", "bw_GBps": 200},
                        "inter": {"type": "ib", "bw_GBps": 12.5, "lat_us": 2}},
           "noise_sigma": 0.02, "workload": [{"role": "dp", "op": "allreduce", "bytes": "4MiB"}]}


@pytest.mark.timeout(300)
def test_overlap_stage_runs_end_to_end_on_the_emulated_nccl(tmp_path, monkeypatch):
    """Stage (f) on CPU (its dry run): two real ranks train DDP on a gloo group and on forced-arm
    dynamiccl groups through the emulated NCCL, then learn; a cap the group lacks is refused and
    recorded, and the report gives every configuration a row."""
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(CLUSTER))
    monkeypatch.setenv("DYNAMICCL_EMULATE_NCCL", str(cluster))
    monkeypatch.setenv("NCCL_MAX_NCHANNELS", "16")  # the report names it: it decides what binds
    out = tmp_path / "overlap.json"
    shape = {"width": 64, "depth": 3, "batch": 16, "bucket_mb": 1, "warmup": 1, "steps": 3,
             "passes": 2, "learn_steps": 24, "arms": ["ring/Simple", "tree/Simple", "tree/LL/c64"]}
    assert gpu_proof.main(["overlap", "--device", "cpu", "--out", str(out),
                           "--shape", json.dumps(shape)]) == 0
    result = json.loads(out.read_text())
    ranks = [r["ok"] for r in result["ranks"]]  # KeyError names a rank's error
    assert list(ranks[0]["configs"]) == ["gloo", "ring/Simple", "tree/Simple"]
    assert "not an arm of allreduce" in ranks[0]["refused"]["tree/LL/c64"]
    assert all(c["step_ms"] > 0 for r in ranks for c in r["configs"].values())
    learn = [r["learn"] for r in ranks]
    assert learn[0]["steps_seen"] == 23  # DDP's hook marks every step after the first
    assert learn[0]["decision_hash"] == learn[1]["decision_hash"]
    text = gpu_proof.report({"overlap": result})
    assert "| gloo | " in text and "| tree/Simple | " in text
    assert "On emulated NCCL on CPU (a dry run), NCCL_MAX_NCHANNELS=16: " in text
    assert "| tree/LL/c64 | refused: " in text
    assert "ranks agree on every decision: True" in text
    # What a stall would show: the arms never run, the budget, the price of a round.
    assert "; never run: " in text and "against a do-no-harm budget of " in text
    assert "- the last consensus round cost the caller " in text
