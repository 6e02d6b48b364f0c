"""The configuration reference (docs/configuration.md) lists exactly the variables the package
accepts, each with the default the package uses; the variables the scripts read are documented
too; and the README's table of the most used settings shows the same defaults."""

import re
from pathlib import Path

from dist_harness import ROOT
from dynamiccl_pg import config

REFERENCE = (Path(ROOT) / "docs" / "configuration.md").read_text()
README = (Path(ROOT) / "README.md").read_text()


def _table(text: str):
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| `(DYNAMICCL_[A-Z_]+)` \| (.*?) \|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def test_the_configuration_table_lists_exactly_the_accepted_variables():
    rows = _table(REFERENCE)
    assert sorted(rows) == sorted(config.ENV_VARS), (
        f"only in docs/configuration.md: {sorted(set(rows) - set(config.ENV_VARS))}; "
        f"only in the package: {sorted(set(config.ENV_VARS) - set(rows))}")


def test_each_default_in_the_tables_is_the_packages():
    readme_rows = _table(README.split("## Settings", 1)[1].split("\n## ", 1)[0])
    assert readme_rows, "the README's settings table is gone"
    for name, shown in list(_table(REFERENCE).items()) + list(readme_rows.items()):
        default = config.ENV_VARS[name][0]
        assert shown == (f"`{default}`" if default else "(empty)"), (name, shown, default)


def test_the_variables_the_scripts_read_are_documented():
    for name in config.SCRIPT_VARS:
        assert f"`{name}`" in REFERENCE, name
