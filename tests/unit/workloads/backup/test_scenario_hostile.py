"""Scenario files as hostile input (issue 12): each used to crash, hang or be accepted.

Every case must end in one sentence naming the file (and the key where there is one),
quickly, without reading more than the size limit. Inputs are generated here, small (the
"100 MB" file is sparse).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import yaml

from lab.errors import ScenarioError
from lab.model import CLAUSES, OBSERVERS, OUTCOMES
from lab.schemas import scenario_schema, validate_scenario
from lab.workloads.backup import scenario
from lab.workloads.backup.scenario_yaml import MAX_BYTES
from tests.conftest import ROOT
from tests.unit.workloads.backup.test_scenario import GOOD, write

SHIPPED = sorted([*ROOT.glob("scenarios/*.yaml"), *ROOT.glob("scenarios/candidate/*.yaml")])


def refused(path: Path, *needles: str) -> str:
    with pytest.raises(ScenarioError) as info:
        scenario.load(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message and message.endswith("."), message
    for needle in needles:
        assert needle in message, message
    return message


def good(**replace: str) -> str:
    text = GOOD.format(name="x")
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    return text


FINDING = '{observer: strace, invocation: 2, key: source_bytes_read, equals: "256 * {size}"}'


def test_a_word_where_a_number_is_compared(tmp_path: Path) -> None:
    # was: loaded, then a TypeError comparing "two" after the whole run, files left behind
    text = good(**{FINDING: "{observer: receiver, key: connections, at_least: two}"})
    refused(write(tmp_path, text), "key 'expect.findings[0].at_least'", "must be a number")


def test_a_20000_term_formula(tmp_path: Path) -> None:
    formula = "+".join(["1"] * 20_000) + "+{size}"  # 40 KB; was: RecursionError
    text = good(**{'"256 * {size}"': json.dumps(formula)})
    refused(write(tmp_path, text), "key 'expect.findings[0].equals'", "at most 200")


def test_a_formula_with_too_many_terms(tmp_path: Path) -> None:
    formula = "+".join(["1"] * 80) + "+{size}"
    text = good(**{'"256 * {size}"': json.dumps(formula)})
    refused(write(tmp_path, text), "too many terms")


def test_20000_nested_brackets(tmp_path: Path) -> None:
    text = good(**{"description: test": "description: " + "[" * 20_000})  # was: RecursionError
    refused(write(tmp_path, text), "nesting deeper than")


def test_a_symlink_to_dev_zero(tmp_path: Path) -> None:
    link = tmp_path / "x.yaml"
    link.symlink_to("/dev/zero")  # was: MemoryError, reading forever
    refused(link, "symbolic link")


def test_a_device(tmp_path: Path) -> None:
    refused(Path("/dev/zero"), "character device")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "x.yaml"
    os.mkfifo(fifo)  # was: open() blocks forever waiting for a writer
    outcome: list[str] = []

    def load() -> None:
        try:
            scenario.load(fifo)
        except ScenarioError as exc:
            outcome.append(str(exc))

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():  # unblock the reader so the test process can end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("loading a FIFO blocked")
    assert outcome and "a FIFO" in outcome[0] and str(fifo) in outcome[0]


def test_a_100_mb_description_is_refused_before_reading(tmp_path: Path) -> None:
    path = write(tmp_path, good(**{"description: test": "description: >\n  "}))
    with open(path, "r+b") as fh:
        fh.seek(0, os.SEEK_END)
        fh.truncate(100 * 1024 * 1024)  # sparse: the test writes a few bytes, not 100 MB
    refused(path, "104,857,600 bytes", f"{MAX_BYTES:,}")


def test_a_file_just_over_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path, good(**{"description: test": "description: " + "a" * MAX_BYTES}))
    refused(path, "more than the")


def test_a_billion_laughs_in_equals(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = "\n".join(lines) + "\n"
    text = bomb + good(**{'equals: "256 * {size}"': "equals: *a8"})
    assert len(text.encode()) < 2000  # was: loaded; 9**9 strings when compared or written
    refused(write(tmp_path, text), "anchors and aliases are not allowed", "line 1")


def test_duplicate_keys(tmp_path: Path) -> None:
    text = good(**{"invocations: 2\n": "invocations: 2\ninvocations: 1\n"})  # was: last wins
    refused(write(tmp_path, text), "key 'invocations' appears twice")


def test_merge_keys(tmp_path: Path) -> None:
    text = good(**{"client: {behavior: baseline}": "client: {<<: {behavior: baseline}}"})
    refused(write(tmp_path, text), "merge keys")


@pytest.mark.parametrize("value", ["[]", "", "7"])
def test_receiver_must_be_a_mapping(tmp_path: Path, value: str) -> None:
    text = good(**{"invocations: 2\n": f"invocations: 2\nreceiver: {value}\n"})  # [] was accepted
    refused(write(tmp_path, text), "key 'receiver' must be a mapping")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(good().encode().replace(b"test", b"t\xffst"))
    refused(path, "not UTF-8")


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("equals: ", "at_most: true, note: ", "must be a number"),
        ('"256 * {size}"', ".nan", "finite"),
        ('"256 * {size}"', "{a: 1}", "must be a string, a number or a boolean"),
        ('"256 * {size}"', '["{size} ** 2"]', "may only use integers"),
        ("description: test", "description: " + "d" * 4001, "key 'description' is longer than"),
        ("key: source_bytes_read", "key: " + "k" * 65, "key 'expect.findings[0].key'"),
    ],
)
def test_values_are_typed_and_bounded(tmp_path: Path, old: str, new: str, needle: str) -> None:
    refused(write(tmp_path, good(**{old: new})), needle)


def test_echoed_values_stay_one_short_line(tmp_path: Path) -> None:
    text = good(**{"behavior: baseline": 'behavior: "tele\\npathy' + "y" * 5000 + '"'})
    message = refused(write(tmp_path, text), "key 'client.behavior'", "is unknown")
    assert len(message) < 400


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shipped_scenarios_load_identically(path: Path) -> None:
    """The strict loader reads every shipped file exactly as the plain safe loader did."""
    raw = yaml.safe_load(path.read_text())
    validate_scenario(raw, path)
    s = scenario.load(path)
    assert (s.name, s.description, s.invocations) == (
        raw["name"],
        raw["description"].strip(),
        raw["invocations"],
    )
    assert (s.behavior, s.client_args) == (raw["client"]["behavior"], raw["client"].get("args", []))
    receiver = raw.get("receiver", {})
    assert s.preload == receiver.get("preload", "none")
    assert [(f.transfer, f.drop_after) for f in s.faults] == [
        (f["transfer"], f["drop_after"]) for f in receiver.get("faults", [])
    ]
    assert s.expect.verdicts == raw["expect"]["verdicts"]
    for got, want in zip(s.expect.findings, raw["expect"].get("findings", []), strict=True):
        op = next(o for o in scenario.OPS if o in want)
        assert (got.observer, got.invocation, got.key, got.op, got.value, got.note) == (
            want["observer"],
            want.get("invocation"),
            want["key"],
            op,
            want[op],
            want.get("note"),
        )
    assert s.text == path.read_text()


def test_schema_names_what_the_code_knows() -> None:
    schema = scenario_schema()
    props = schema["properties"]
    assert props["client"]["properties"]["behavior"]["enum"] == list(scenario.BEHAVIORS)
    finding = schema["$defs"]["finding"]["properties"]
    assert finding["observer"]["enum"] == list(OBSERVERS)
    assert set(finding) - {"observer", "invocation", "key", "note"} == set(scenario.OPS)
    verdicts = props["expect"]["properties"]["verdicts"]
    assert verdicts["required"] == list(CLAUSES)
    assert next(iter(verdicts["patternProperties"].values()))["enum"] == list(OUTCOMES)


#: an editor's YAML language server reads the first line; the lab's loader ignores it
SCHEMA_LINE = "# yaml-language-server: $schema="


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_shipped_scenario_names_the_schema_the_loader_uses(path: Path) -> None:
    first = path.read_text().splitlines()[0]
    assert first.startswith(SCHEMA_LINE), f"{path}: first line must be '{SCHEMA_LINE}…'"
    target = (path.parent / first.removeprefix(SCHEMA_LINE)).resolve()
    assert target == ROOT / "lab" / "schemas" / "scenario.schema.json"
    assert json.loads(target.read_text()) == scenario_schema()  # the loader's own schema


def test_the_shipped_set_is_all_of_them() -> None:
    assert len([p for p in SHIPPED if "candidate" in p.parts]) >= 4 and len(SHIPPED) >= 12
