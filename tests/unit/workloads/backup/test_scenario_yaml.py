"""The strict YAML loader, on libyaml's C parser and on PyYAML's pure-Python one: the same
documents, and the same refusals with the same sentences and positions."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lab.errors import ScenarioError
from lab.workloads.backup import scenario_yaml
from lab.workloads.backup.scenario_yaml import MAX_DEPTH, parse_strict

ROOT = Path(__file__).resolve().parents[4]

REFUSED = {
    "anchor": "a: &x 1\nb: 2\n",
    "alias": "a: &x [1]\nb: *x\n",
    "merge": "base: {k: 1}\nother:\n  <<: {k: 2}\n",
    "duplicate": "a: 1\nb: 2\na: 3\n",
    "deep": "v: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n",
    "invalid": "a: [1, 2\n",
}


def _both(text: str, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    found: list[object] = []
    for fast in (True, False):
        monkeypatch.setattr(yaml, "__with_libyaml__", fast)
        try:
            found.append(parse_strict(text, Path("s.yaml")))
        except ScenarioError as exc:
            found.append(f"refused: {exc}")
    return found


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_same_refusal_on_either_parser(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = _both(REFUSED[name], monkeypatch)
    assert isinstance(fast, str) and fast.startswith("refused: s.yaml:")
    if name != "invalid":  # libyaml and PyYAML word a syntax error each their own way
        assert fast == slow
    else:
        assert isinstance(slow, str) and "is not valid YAML" in fast and "is not valid YAML" in slow


def test_the_deepest_allowed_nesting_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "v: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    fast, slow = _both(text, monkeypatch)
    assert fast == slow and isinstance(fast, dict)


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")))
def test_every_shipped_scenario_parses_the_same(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = _both(path.read_text(), monkeypatch)
    assert fast == slow and isinstance(fast, dict)


def test_the_fast_loader_is_libyamls() -> None:
    assert not yaml.__with_libyaml__ or issubclass(scenario_yaml._FAST, yaml.CSafeLoader)


def test_a_libyaml_nesting_limit_reads_as_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    # libyaml builds that carry a nesting limit (1000) of their own meet it before the first
    # event is handed out (their scanner reads 1024 characters ahead): the same sentence
    mark = yaml.Mark("s.yaml", 0, 1, 1012, None, None)

    def limited(text: str, Loader: object) -> object:
        raise yaml.scanner.ScannerError(
            "while increasing flow level", mark, "exceeded maximum nesting depth", mark
        )

    monkeypatch.setattr(yaml, "__with_libyaml__", True)
    monkeypatch.setattr(yaml, "parse", limited)
    with pytest.raises(ScenarioError) as info:
        parse_strict("v: " + "[" * 2000 + "\n", Path("s.yaml"))
    assert (
        str(info.value) == f"s.yaml: line 2, column 1013: nesting deeper than {MAX_DEPTH} levels."
    )
