"""`python -m dynamiccl_pg COMMAND`: one argparse parser with a subparser per command; --help per
command, wrong or missing commands rejected with the list of commands, and each command's output
as it was."""

import json
import os
import re
import subprocess
import sys

import pytest

from dist_harness import ROOT

from dynamiccl_pg.__main__ import COMMANDS, main

SCENARIO = os.path.join(ROOT, "benchmarks", "scenarios", "ll128_degraded.json")

# Every option each command takes, as its --help must name it.
OPTIONS = {
    "config": ["-h", "--help"],
    "actions": ["-h", "--help"],
    "report": ["prefix", "--out"],
    "sim": ["--scenario", "-s", "--schema", "--out", "-o", "--steps", "--prior", "--prior-model",
            "--policy-out", "--head", "--no-plot", "--check", "--quiet", "-q"],
    "prior": ["train", "eval"],
}


def python_m(*args):
    """`python -m dynamiccl_pg ARGS` in a fresh interpreter: the real entry point."""
    return subprocess.run([sys.executable, "-m", "dynamiccl_pg", *args], capture_output=True,
                          text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))


def exit_status(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


def test_every_command_is_tested():
    assert set(OPTIONS) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_help_per_command_names_its_options(command, capsys):
    assert exit_status([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m dynamiccl_pg {command} ")
    for option in OPTIONS[command]:
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", out), (command, option)


def test_top_level_help_lists_the_commands(capsys):
    assert exit_status(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f"    {name} " in out, name
    assert "{config,actions,report,sim,prior}" in out


def test_unknown_command_is_named_with_the_valid_ones():
    proc = python_m("bogus", "--out", "x")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "invalid choice: 'bogus'" in proc.stderr
    for name in COMMANDS:
        assert f"'{name}'" in proc.stderr, name


def test_no_command_prints_the_usage_with_the_commands():
    proc = python_m()
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "usage: python -m dynamiccl_pg [-h] {config,actions,report,sim,prior}")
    assert "required: command" in proc.stderr


def test_unrecognized_argument_is_reported_by_its_command(capsys):
    assert exit_status(["config", "--verbose"]) == 2
    err = capsys.readouterr().err
    assert "python -m dynamiccl_pg config: error: unrecognized arguments: --verbose" in err


def test_config_prints_every_variable_and_the_head_settings(monkeypatch, capsys):
    for name in list(os.environ):
        if name.startswith("DYNAMICCL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DYNAMICCL_ROUND_CALLS", "32")
    assert main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("DYNAMICCL_MODE               default 'learn'   now (unset)      "
            "learn | frozen | off") in lines
    assert any(line.startswith("DYNAMICCL_ROUND_CALLS        default '16'      now '32'  ")
               for line in lines)
    assert any(line.startswith("learner head settings (DYNAMICCL_HEADS=\"role.key=value;...\", "
                               "role: all or one of ") for line in lines)
    assert any(line.startswith("  probe_budget ") for line in lines)
    assert any(line.strip().startswith("defaults: ") for line in lines)


def test_actions_prints_the_arms_per_op_and_engine(capsys):
    assert main(["actions"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The NCCL arms are those of torch's own NCCL release (chunk-size arms from 2.30 on).
    assert lines[0].startswith("NCCL arms for torch's NCCL ")
    assert lines[2] == "op              engine arms (first = engine default)"
    assert lines[3].startswith("allreduce       cpu    default, ring, ")
    assert lines[4].startswith("                nccl   default, ")
    assert lines[-1] == ('pin an op to an arm on every rank: '
                         'DYNAMICCL_FORCE="allreduce:ring;allgather:rd"')


def test_sim_runs_through_the_command_and_records_its_words(tmp_path, capsys):
    assert exit_status(["sim"]) == 2
    assert "python -m dynamiccl_pg sim: error: --scenario is required" in capsys.readouterr().err
    out = tmp_path / "out"
    argv = ["--scenario", SCENARIO, "--steps", "200", "-o", str(out), "--no-plot", "-q"]
    assert main(["sim", *argv]) == 0
    assert "ll128_degraded" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert results["command"] == "python -m dynamiccl_pg sim " + " ".join(argv)


def test_report_takes_its_options_in_any_order(tmp_path, capsys):
    # options before the prefix reach the report, which looks for the traces
    with pytest.raises(SystemExit) as e:
        main(["report", "--out", str(tmp_path / "out"), str(tmp_path / "none")])
    assert e.value.code != 0
    assert "none.rank*.jsonl" in str(e.value.code) + capsys.readouterr().err
