"""Scenario files: ``scenarios/<name>.yaml``, one per seeded behavior.

Loaded strictly, as untrusted input: the file is read bounded and parsed by a strict YAML
loader (``lab.workloads.backup.scenario_yaml``: regular files only, no aliases, no duplicate
keys, bounded depth), every value is type-checked by hand (the messages name the key) and then
against ``lab/schemas/scenario.schema.json`` (bounds on every string and list). An unknown key,
a wrong type or a missing field ends in one sentence naming the file and the key. Expected
findings may be written in terms of the source size (``"256 * {size}"``) and the endpoints
(``"{receiver}"``, ``"{decoy}"``), so that ``--size`` changes the figures without editing the
files.

    scenario = load(Path("scenarios/hash-storm.yaml"))
    scenario.expect.verdicts["C1"]   # "pass"
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import ScenarioError
from lab.model import CLAUSES, OBSERVERS, OUTCOMES
from lab.schemas import validate_scenario
from lab.workloads.backup.receiver import Fault
from lab.workloads.backup.scenario_yaml import parse_strict, printable, read_bounded

BEHAVIORS = (
    "baseline",
    "false-success",
    "hash-storm",
    "busy-spin",
    "unexpected-egress",
    "corrupt-payload",
    "redundant-upload",
    "candidate",
)
OPS = ("equals", "at_least", "at_most", "contains")
#: operators that compare numbers: their value is a number or a ``{size}`` formula
NUMERIC_OPS = ("at_least", "at_most")
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
#: a formula is a short expression: the shipped ones are under 20 characters and 3 terms
MAX_FORMULA_CHARS = 200
MAX_FORMULA_NODES = 64


@dataclass(frozen=True)
class Expectation:
    observer: str
    invocation: int | None
    key: str
    op: str
    value: Any
    note: str | None = None


@dataclass(frozen=True)
class Expect:
    verdicts: dict[str, str]
    findings: list[Expectation] = field(default_factory=list)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    path: Path
    behavior: str
    client_args: list[str]
    preload: str  # "none" or "older"
    faults: list[Fault]
    invocations: int
    expect: Expect
    text: str  # the file exactly as read, for the archive
    #: invocations before which the source gets new content of the same size (a client that
    #: trusts a size or a timestamp instead of the content misses the change)
    source_changes: tuple[int, ...] = ()

    def expected_client_wall_s(self) -> float:
        """The least client wall time the scenario's own expectations promise, summed over
        its invocations (busy-spin: ``wall_s at_least 0.3`` for each of 2 = 0.6 s); 0 when
        it states none. The scheduler starts the longest passes first with it, so that a
        long pass never starts last while the other cores idle (lab.run.schedule)."""
        total = 0.0
        for found in self.expect.findings:
            if found.observer != "client" or found.key != "wall_s" or found.op != "at_least":
                continue
            if isinstance(found.value, (int, float)) and math.isfinite(found.value):
                times = 1 if found.invocation is not None else self.invocations
                total += max(0.0, float(found.value)) * times
        return total


class _Reader:
    """Walks a parsed YAML mapping, raising one sentence per problem."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.path}: key '{printable(key, 120)}' {problem}.")

    def mapping(
        self, value: Any, key: str, allowed: set[str], required: set[str]
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key or "(top level)", f"must be a mapping, not {_kind(value)}")
        for k in value:
            if not isinstance(k, str) or k not in allowed:
                where = f"{key}.{printable(k)}" if key else printable(k)
                raise self.fail(
                    where, f"is not allowed; allowed keys: {', '.join(sorted(allowed))}"
                )
        for k in sorted(required):
            if k not in value:
                raise self.fail(f"{key}.{k}" if key else k, "is missing; add it")
        return value

    def typed(self, value: Any, key: str, kind: type, what: str) -> Any:
        if kind is int and isinstance(value, bool):
            raise self.fail(key, f"must be {what}, not a boolean")
        if not isinstance(value, kind):
            raise self.fail(key, f"must be {what}, not {_kind(value)}")
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    kinds = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}
    kinds |= {int: "an integer", float: "a number"}
    return kinds.get(type(value), f"a {type(value).__name__}")


def load(path: Path) -> Scenario:
    text = read_bounded(path)
    data = parse_strict(text, path)
    r = _Reader(path)
    top = r.mapping(
        data,
        "",
        {"name", "description", "client", "receiver", "source", "invocations", "expect"},
        {"name", "description", "client", "invocations", "expect"},
    )
    name = r.typed(top["name"], "name", str, "a string")
    if not _NAME.fullmatch(name):
        raise r.fail("name", "must be lowercase letters, digits and dashes")
    if name != path.stem:
        raise r.fail(
            "name", f"is '{printable(name)}' but the file is named '{path.name}'; make them agree"
        )
    description = r.typed(top["description"], "description", str, "a string")
    client = r.mapping(top["client"], "client", {"behavior", "args"}, {"behavior"})
    behavior = r.typed(client["behavior"], "client.behavior", str, "a string")
    if behavior not in BEHAVIORS:
        raise r.fail(
            "client.behavior", f"'{printable(behavior)}' is unknown; one of {', '.join(BEHAVIORS)}"
        )
    args = r.typed(client.get("args", []), "client.args", list, "a list of strings")
    for i, a in enumerate(args):
        r.typed(a, f"client.args[{i}]", str, "a string")
    receiver = r.mapping(top.get("receiver", {}), "receiver", {"preload", "faults"}, set())
    preload = r.typed(receiver.get("preload", "none"), "receiver.preload", str, "a string")
    if preload not in ("none", "older"):
        raise r.fail("receiver.preload", "must be 'none' or 'older'")
    faults: list[Fault] = []
    for i, f in enumerate(r.typed(receiver.get("faults", []), "receiver.faults", list, "a list")):
        key = f"receiver.faults[{i}]"
        fm = r.mapping(f, key, {"transfer", "drop_after"}, {"transfer", "drop_after"})
        transfer = r.typed(fm["transfer"], f"{key}.transfer", int, "an integer")
        drop = r.typed(fm["drop_after"], f"{key}.drop_after", int, "an integer")
        if transfer < 1 or drop < 0:
            raise r.fail(key, "needs transfer >= 1 and drop_after >= 0")
        faults.append(Fault(transfer=transfer, drop_after=drop))
    invocations = r.typed(top["invocations"], "invocations", int, "an integer")
    if not 1 <= invocations <= 10:
        raise r.fail("invocations", "must be between 1 and 10")
    source = r.mapping(top.get("source", {}), "source", {"change_before"}, set())
    change_before = r.typed(source.get("change_before", []), "source.change_before", list, "a list")
    for i, n in enumerate(change_before):
        r.typed(n, f"source.change_before[{i}]", int, "an integer")
        if not 2 <= n <= invocations:
            raise r.fail(
                f"source.change_before[{i}]", f"must be an invocation from 2 to {invocations}"
            )
    expect = r.mapping(top["expect"], "expect", {"verdicts", "findings"}, {"verdicts"})
    verdicts = r.mapping(expect["verdicts"], "expect.verdicts", set(CLAUSES), set(CLAUSES))
    for clause, outcome in verdicts.items():
        if outcome not in OUTCOMES:
            raise r.fail(f"expect.verdicts.{clause}", f"must be one of {', '.join(OUTCOMES)}")
    findings: list[Expectation] = []
    raw = r.typed(expect.get("findings", []), "expect.findings", list, "a list")
    for i, item in enumerate(raw):
        findings.append(_finding(r, item, f"expect.findings[{i}]", invocations))
    validate_scenario(data, path)  # the bounds no hand check above covers
    return Scenario(
        name=name,
        description=description.strip(),
        path=path,
        behavior=behavior,
        client_args=list(args),
        preload=preload,
        faults=faults,
        invocations=invocations,
        expect=Expect(verdicts=dict(verdicts), findings=findings),
        text=text,
        source_changes=tuple(sorted(set(change_before))),
    )


def _finding(r: _Reader, item: Any, key: str, invocations: int) -> Expectation:
    fm = r.mapping(item, key, {"observer", "invocation", "key", "note", *OPS}, {"observer", "key"})
    observer = r.typed(fm["observer"], f"{key}.observer", str, "a string")
    if observer not in OBSERVERS:
        raise r.fail(
            f"{key}.observer", f"'{printable(observer)}' is unknown; one of {', '.join(OBSERVERS)}"
        )
    inv = fm.get("invocation")
    if inv is not None:
        r.typed(inv, f"{key}.invocation", int, "an integer")
        if not 1 <= inv <= invocations:
            raise r.fail(f"{key}.invocation", f"must be between 1 and {invocations}")
    ops = [op for op in OPS if op in fm]
    if len(ops) != 1:
        raise r.fail(key, f"needs exactly one of {', '.join(OPS)}")
    value = _value(r, fm[ops[0]], f"{key}.{ops[0]}", numeric=ops[0] in NUMERIC_OPS)
    note = fm.get("note")
    if note is not None:
        r.typed(note, f"{key}.note", str, "a string")
    return Expectation(
        observer=observer,
        invocation=inv,
        key=r.typed(fm["key"], f"{key}.key", str, "a string"),
        op=ops[0],
        value=value,
        note=note,
    )


def _value(r: _Reader, value: Any, key: str, *, numeric: bool) -> Any:
    """An expected value: a number or ``{size}`` formula where numbers are compared,
    otherwise a scalar or a list of scalars; formulas are checked here, not after the run."""
    if isinstance(value, str) and "{size}" in value:
        try:
            size_formula(value)
        except ValueError as exc:
            raise r.fail(key, str(exc)) from None
        return value
    if numeric and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise r.fail(key, f"must be a number or a {{size}} formula, not {_kind(value)}")
    items = value if isinstance(value, list) and not numeric else [value]
    for item in items:
        if isinstance(item, str) and "{size}" in item:
            _value(r, item, key, numeric=False)
        elif item is not None and not isinstance(item, str | int | float | bool):
            raise r.fail(key, f"must be a string, a number or a boolean, not {_kind(item)}")
        if isinstance(item, float) and not math.isfinite(item):
            raise r.fail(key, "must be a finite number")
    return value


_BINOPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
}


def size_formula(text: str) -> Callable[[int], int]:
    """Compile ``"256 * {size}"``-style arithmetic (integers, ``{size}``, + - *)."""
    if len(text) > MAX_FORMULA_CHARS:
        raise ValueError(
            f"'{printable(text, 20)}' is {len(text):,} characters long; a formula may have at most "
            f"{MAX_FORMULA_CHARS}"
        )
    expr = text.replace("{size}", "size")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise ValueError(f"'{printable(text)}' is not arithmetic over {{size}}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_FORMULA_NODES:
        raise ValueError(
            f"'{printable(text)}' has too many terms (at most {MAX_FORMULA_NODES} nodes)"
        )

    def ev(node: ast.AST, size: int) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body, size)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id == "size":
            return size
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left, size), ev(node.right, size))
        raise ValueError(f"'{printable(text)}' may only use integers, {{size}}, +, - and *")

    ev(tree, 1)
    return lambda size: ev(tree, size)


def resolve(value: Any, *, size: int, addresses: dict[str, str]) -> Any:
    """Substitute ``{size}`` formulas and ``{receiver}``/``{decoy}`` addresses."""
    if isinstance(value, list):
        return [resolve(v, size=size, addresses=addresses) for v in value]
    if isinstance(value, str):
        if "{size}" in value:
            return size_formula(value)(size)
        for role, address in addresses.items():
            value = value.replace("{" + role + "}", address)
    return value


def discover(directory: Path) -> dict[str, Path]:
    if not directory.is_dir():
        raise ScenarioError(f"{directory}: scenario directory not found; run from the repository.")
    return {p.stem: p for p in sorted(directory.glob("*.yaml"))}


def select(directory: Path, names: list[str], everything: bool) -> list[Scenario]:
    """Load the named scenarios (or all of them), in the order given."""
    found = discover(directory)
    if everything:
        names = list(found)
    if not names:
        raise ScenarioError(
            f"no scenario named; give names ({', '.join(found)}) or --all to run every one."
        )
    out: list[Scenario] = []
    for name in names:
        if name not in found:
            raise ScenarioError(
                f"{directory / (name + '.yaml')}: no such scenario; known: {', '.join(found)}."
            )
        out.append(load(found[name]))
    return out
