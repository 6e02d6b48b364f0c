"""The README's configuration table lists exactly the variables the package accepts, each with
the default the package uses; the variables the scripts read are documented too."""

import re
from pathlib import Path

from dist_harness import ROOT
from dynamiccl_pg import config

README = (Path(ROOT) / "README.md").read_text()


def _config_table():
    section = README.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `(DYNAMICCL_[A-Z_]+)` \| (.*?) \|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def test_the_configuration_table_lists_exactly_the_accepted_variables():
    rows = _config_table()
    assert sorted(rows) == sorted(config.ENV_VARS), (
        f"only in the README: {sorted(set(rows) - set(config.ENV_VARS))}; "
        f"only in the package: {sorted(set(config.ENV_VARS) - set(rows))}")


def test_each_default_in_the_table_is_the_packages():
    for name, shown in _config_table().items():
        default = config.ENV_VARS[name][0]
        assert shown == (f"`{default}`" if default else "(empty)"), (name, shown, default)


def test_the_variables_the_scripts_read_are_documented():
    for name in config.SCRIPT_VARS:
        assert f"`{name}`" in README, name
