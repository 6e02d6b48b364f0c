"""Scenario files for the simulator: strict parsing and validation.

A scenario is a JSON object whose keys are declared once, in C++ (csrc/sim/scenario_schema.cpp),
and read here as ``dynamiccl_pg._C.sim.scenario_schema()``. This module walks that table: an
unknown key or a bad value raises ScenarioError naming the key path, the value, and what is
accepted; all problems of a file are reported at once. The validated data then fills the C++
ScenarioSpec through the same table (``Scenario.to_spec()``), whose rules relating several keys
(``validate_spec``) are reported the same way.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any

from dynamiccl_pg import _C

__all__ = [
    "ScenarioError",
    "Scenario",
    "check_key",
    "load_scenario",
    "parse_scenario",
    "range_text",
    "scenario_files",
    "scenario_schema",
    "parse_size",
]

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KiB|MB|MiB|GB|GiB)\s*$")
_UNITS = {"B": 1, "KB": 10**3, "KiB": 2**10, "MB": 10**6, "MiB": 2**20, "GB": 10**9, "GiB": 2**30}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BAD = object()  # a value that failed its check (the problem is already recorded)


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message lists every problem found."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = list(problems)
        super().__init__(f"{source}: invalid scenario:\n  " + "\n  ".join(self.problems))


def parse_size(value: Any) -> int:
    """Bytes from an integer or a string such as "64KiB", "1.5MB" (KB/MB/GB are decimal)."""
    if isinstance(value, bool):
        raise ValueError("expected a byte count, got a boolean")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"expected a byte count >= 1, got {value}")
        return value
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if not m:
            raise ValueError(
                f"expected a byte count such as 4096 or \"64KiB\" (units B, KB, KiB, MB, MiB, "
                f"GB, GiB), got {value!r}"
            )
        n = float(m.group(1)) * _UNITS[m.group(2)]
        if n < 1 or n != math.floor(n):
            raise ValueError(f"{value!r} is not a whole number of bytes >= 1")
        return int(n)
    raise ValueError(f"expected a byte count (integer or string like \"64KiB\"), got {value!r}")


@functools.lru_cache(maxsize=None)
def scenario_schema() -> dict[str, Any]:
    """The table of every key (nested dicts: key, type, required, doc, default, ...)."""
    return _C.sim.scenario_schema()


def range_text(node: dict[str, Any]) -> str:
    """'in [1, 64]', 'in (0, 1000]', '>= 0': the accepted range of a number-like key."""
    lo, hi = _num(node["min"]), node.get("max")
    if hi is None:
        return f"{'>' if node['min_open'] else '>='} {lo}"
    return f"in {'(' if node['min_open'] else '['}{lo}, {_num(hi)}]"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _entry_path(path: str, key: str) -> str:
    """A map entry's path: learner.tp, but truth['ring/LL']."""
    return _join(path, key) if _IDENTIFIER.match(key) else f"{path}[{key!r}]"


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Checker:
    """Walks a value against a schema node, collecting problems as "path: what is wrong"."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, path: str, msg: str) -> None:
        self.problems.append(f"{path}: {msg}")

    def check(self, node: dict[str, Any], value: Any, path: str) -> Any:
        """The value with canonical spellings and defaults filled in, or _BAD."""
        return getattr(self, "_" + node["type"])(node, value, path)

    # ---- containers ---------------------------------------------------------------------

    def _object(self, node: dict, value: Any, path: str, fields: list | None = None) -> Any:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {_show(value)}")
            return _BAD
        by_key = {f["key"]: f for f in (fields if fields is not None else node["fields"])}
        for key in value:
            if key not in by_key:
                self.fail(_join(path, key), f"unknown key (accepted: {', '.join(by_key)})")
        if node["nonempty"] and not value:
            self.fail(path, f"give at least one of: {', '.join(by_key)}")
        out = {}
        for key, field in by_key.items():
            at = _join(path, key)
            if key in value:
                checked = self.check(field, value[key], at)
                if checked is not _BAD:
                    out[key] = checked
            elif field["required"]:
                self.fail(at, "missing (required)")
            elif "default" in field:
                out[key] = field["default"]
            elif field["type"] == "object" and "absent" not in field:
                out[key] = self.check(field, {}, at)  # its keys' defaults
        return out

    def _variants(self, node: dict, value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {_show(value)}")
            return _BAD
        tag = node["fields"][0]
        kind = self.check(tag, value.get(tag["key"], tag.get("default")), _join(path, tag["key"]))
        if kind is _BAD:
            return _BAD
        variant = next(v for v in node["variants"] if v["key"] == kind)
        return self._object(variant, value, path, node["fields"] + variant["fields"])

    def _list(self, node: dict, value: Any, path: str) -> Any:
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_show(value)}")
            return _BAD
        if node["nonempty"] and not value:
            self.fail(path, "expected at least one entry")
        checked = [self.check(node["item"], v, f"{path}[{i}]") for i, v in enumerate(value)]
        return [v for v in checked if v is not _BAD]

    def _map(self, node: dict, value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {_show(value)}")
            return _BAD
        out: dict[str, Any] = {}
        for key, v in value.items():
            at = _entry_path(path, key)
            canon = self._map_key(node, key, at)
            checked = self.check(node["item"], v, at)
            if canon is None or checked is _BAD:
                continue
            if canon in out:
                self.fail(at, f"duplicates {canon!r}")
                continue
            out[canon] = checked
        return out

    def _map_key(self, node: dict, key: str, path: str) -> str | None:
        """The key's canonical spelling, or None after reporting why it is not accepted."""
        parts, sep, wildcard = node["key_parts"], node["key_separator"], node["key_wildcard"]
        accepted = [p["choices"] + ([wildcard] if wildcard else []) for p in parts]
        words = key.split(sep) if sep else [key]
        if len(words) != len(parts):
            pattern = sep.join(p["name"] for p in parts)
            options = "; ".join(f"{p['name']}: {', '.join(a)}" for p, a in zip(parts, accepted))
            self.fail(path, f"key {key!r} must be \"{pattern}\" ({options})")
            return None
        fold = str.lower if node["key_ignore_case"] else str
        canon = []
        for word, part, choices in zip(words, parts, accepted):
            match = next((c for c in choices if fold(c) == fold(word.strip())), None)
            if match is None and len(parts) == 1:
                self.fail(path, f"unknown key (accepted: {', '.join(choices)})")
            elif match is None:
                self.fail(path, f"unknown {part['noun']} {word!r} (accepted: {', '.join(choices)})")
            canon.append(match)
        return None if None in canon else sep.join(canon)

    # ---- scalars ------------------------------------------------------------------------

    def _in_range(self, node: dict, value: Any, path: str, what: str) -> Any:
        lo, hi = node["min"], node.get("max")
        below = value <= lo if node["min_open"] else value < lo
        infinite = isinstance(value, float) and not math.isfinite(value)
        if below or (hi is not None and value > hi) or infinite:
            self.fail(path, f"{value} is out of range (accepted: {what} {range_text(node)})")
            return _BAD
        return value

    def _integer(self, node: dict, value: Any, path: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected an integer, got {_show(value)}")
            return _BAD
        return self._in_range(node, value, path, "integers")

    def _number(self, node: dict, value: Any, path: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(path, f"expected a number, got {_show(value)}")
            return _BAD
        checked = self._in_range(node, value, path, "numbers")
        return checked if checked is _BAD else float(checked)

    def _size(self, node: dict, value: Any, path: str) -> Any:
        try:
            n = parse_size(value)
        except ValueError as e:
            self.fail(path, str(e))
            return _BAD
        return self._in_range(node, n, path, "byte counts")

    def _boolean(self, node: dict, value: Any, path: str) -> Any:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_show(value)}")
            return _BAD
        return value

    def _string(self, node: dict, value: Any, path: str) -> Any:
        if not isinstance(value, str):
            self.fail(path, f"expected a string, got {_show(value)}")
            return _BAD
        if "pattern" in node and not re.fullmatch(node["pattern"], value):
            self.fail(path, f"{value!r} is not accepted (accepted: {node['pattern_doc']})")
            return _BAD
        return value

    def _choice(self, node: dict, value: Any, path: str) -> Any:
        if not isinstance(value, str) or value not in node["choices"]:
            self.fail(path, f"{_show(value)} is not accepted "
                            f"(accepted: {', '.join(node['choices'])})")
            return _BAD
        return value


@dataclass
class Scenario:
    """A validated scenario: the file's keys, canonically spelled, with defaults filled in."""

    data: dict[str, Any]
    source: str = "<scenario>"

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def description(self) -> str:
        return self.data["description"]

    @property
    def expect(self) -> str | None:
        """'gain' or 'no_gain'; None = judged from the run."""
        return self.data.get("expect")

    def to_spec(self):
        """The C++ ScenarioSpec that dynamiccl_pg._C.sim runs."""
        return _C.sim.spec_from_dict(self.data)

    def with_overrides(self, steps: int | None = None,
                       heads: list[tuple[str, str, Any]] = (),
                       prior: str | None = None, seed: int | None = None) -> Scenario:
        """A copy with `steps`, `prior`, `seed` and learner settings (role, key, value) replaced,
        checked again."""
        data = copy.deepcopy(self.data)
        if steps is not None:
            data["steps"] = steps
        if prior is not None:
            data["prior"] = prior
        if seed is not None:
            data["seed"] = seed
        for role, key, value in heads:
            data.setdefault("learner", {}).setdefault(role, {})[key] = value
        return parse_scenario(data, self.source)


def _top_level(key: str) -> dict[str, Any]:
    return next(f for f in scenario_schema()["fields"] if f["key"] == key)


def check_key(key: str, value: Any) -> list[str]:
    """The problems of `value` as the scenario's top-level `key` (e.g. command-line overrides)."""
    c = _Checker()
    c.check(_top_level(key), value, key)
    return c.problems


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate a decoded JSON object; raises ScenarioError listing every problem."""
    c = _Checker()
    validated = c.check(scenario_schema(), data, "")
    if not c.problems:  # rules relating several keys are judged on well-formed keys only
        spec = _C.sim.spec_from_dict(validated)
        c.problems += [f"{path}: {msg}" for path, msg in _C.sim.spec_problems(spec)]
    if c.problems:
        raise ScenarioError(source, c.problems)
    return Scenario(validated, source)


def load_scenario(path: str | os.PathLike) -> Scenario:
    """Read and validate one scenario file."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise ScenarioError(path, [f"not valid JSON: {e}"]) from None
    except OSError as e:
        raise ScenarioError(path, [f"cannot read: {e.strerror}"]) from None
    return parse_scenario(data, source=path)


def scenario_files(paths: list[str]) -> list[str]:
    """Files named directly, plus every *.json in directories (sorted). Raises FileNotFoundError."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".json"))
            if not found:
                raise FileNotFoundError(f"{p}: no *.json scenario files in this directory")
            out.extend(found)
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such scenario file or directory")
    return out
