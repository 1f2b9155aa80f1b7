from __future__ import annotations

from pathlib import Path

import pytest

from lab.errors import ScenarioError
from lab.workloads.backup import scenario
from tests.conftest import ROOT

GOOD = """\
name: {name}
description: test
client: {{behavior: baseline}}
invocations: 2
expect:
  verdicts: {{C1: pass, C2: pass, C3: pass, C4: pass, C5: pass, C6: pass}}
  findings:
    - {{observer: strace, invocation: 2, key: source_bytes_read, equals: "256 * {{size}}"}}
"""


def write(tmp_path: Path, text: str, name: str = "x") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_every_shipped_scenario_loads() -> None:
    found = scenario.discover(ROOT / "scenarios")
    assert set(found) == {
        "baseline",
        "false-success",
        "hash-storm",
        "busy-spin",
        "unexpected-egress",
        "interrupted-transfer",
        "corrupt-payload",
        "redundant-upload",
    }
    for path in found.values():
        s = scenario.load(path)
        assert s.invocations == 2 and set(s.expect.verdicts) == set(scenario.CLAUSES)


def test_size_formula_and_placeholders(tmp_path: Path) -> None:
    s = scenario.load(write(tmp_path, GOOD.format(name="x")))
    value = scenario.resolve(s.expect.findings[0].value, size=524_288, addresses={})
    assert value == 134_217_728
    assert scenario.resolve(["{decoy}"], size=1, addresses={"decoy": "127.0.0.1:9"}) == [
        "127.0.0.1:9"
    ]


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (
            lambda t: t.replace("invocations: 2", "invocations: two"),
            "key 'invocations' must be an integer",
        ),
        (lambda t: t.replace("description: test\n", ""), "key 'description' is missing"),
        (lambda t: t + "colour: red\n", "key 'colour' is not allowed"),
        (lambda t: t.replace("C6: pass", "C6: maybe"), "key 'expect.verdicts.C6' must be one of"),
        (lambda t: t.replace("C6: pass", "C7: pass"), "key 'expect.verdicts.C7' is not allowed"),
        (
            lambda t: t.replace("behavior: baseline", "behavior: telepathy"),
            "'telepathy' is unknown",
        ),
        (lambda t: t.replace("observer: strace", "observer: crystal"), "'crystal' is unknown"),
        (lambda t: t.replace('"256 * {size}"', '"__import__({size})"'), "expect.findings[0]"),
        (lambda t: t.replace('"256 * {size}"', '"{size} ** 2"'), "may only use integers"),
        (lambda t: t.replace("invocation: 2", "invocation: 3"), "must be between 1 and 2"),
        (lambda t: t.replace("name: x", "name: y"), "key 'name' is 'y' but the file is named"),
        (
            lambda t: t.replace("client: {behavior: baseline}", "client: [1]"),
            "key 'client' must be a mapping",
        ),
        (lambda t: "name: [unclosed\n", "is not valid YAML at line"),
    ],
)
def test_bad_files_give_one_sentence(tmp_path: Path, mutate: object, needle: str) -> None:
    assert callable(mutate)
    path = write(tmp_path, mutate(GOOD.format(name="x")))
    with pytest.raises(ScenarioError) as info:
        scenario.load(path)
    message = str(info.value)
    assert needle in message, message
    assert str(path) in message and "\n" not in message and message.endswith(".")


def test_unknown_scenario_name(tmp_path: Path) -> None:
    write(tmp_path, GOOD.format(name="x"))
    with pytest.raises(ScenarioError, match="no such scenario; known: x"):
        scenario.select(tmp_path, ["nope"], False)
