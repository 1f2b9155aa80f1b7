"""A fixture task (``campaigns/*/task.yaml``, validated against ``lab/schemas/task.schema.json``):
a workload's fixture, the text the agent gets, what it may edit and what is protected, how a
result is verified and which clause each verdict decides.

    task = load_fixture_task(Path("campaigns/safe-store/task.yaml"))   # TaskError, one sentence
    task.fixture_dir, task.editable, task.protected, task.commands["test"].argv
    task.clauses["S1"].command, task.clauses["S3"].oracle, task.success
    is_fixture_task(Path("campaigns/speedup.yaml"))                    # False: a backup task

The file is read as untrusted input, as a scenario file is: bounded, regular, strict YAML
(:mod:`lab.workloads.backup.scenario_yaml`), then the schema, then the cross-references (a
clause naming a verification command that does not exist, a protected file missing from the
fixture).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lab import workloads
from lab.errors import ScenarioError, TaskError
from lab.schemas import validate_task
from lab.workloads.backup.scenario_yaml import parse_strict, read_bounded

Parse = Literal["go-test-json", "junit", "none"]


@dataclass(frozen=True)
class VerifyCommand:
    id: str
    argv: tuple[str, ...]
    timeout_s: float
    keep: tuple[str, ...]
    parse: Parse
    junit_file: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "argv": list(self.argv),
            "timeout_s": self.timeout_s,
            "keep": list(self.keep),
            "parse": self.parse,
            "junit_file": self.junit_file,
        }


@dataclass(frozen=True)
class ClauseSpec:
    id: str
    requirement: str
    #: the verification command deciding it, or None when the oracle does
    command: str | None

    @property
    def oracle(self) -> bool:
        return self.command is None


@dataclass(frozen=True, kw_only=True)
class FixtureTask:
    name: str
    path: Path
    sha256: str
    raw: str
    workload: str
    text: str
    description: str
    budget_s: float
    repetitions: int
    fixture_dir: Path
    editable: tuple[str, ...]
    protected: tuple[str, ...]
    toolchain: Literal["go", "none"]
    commands: dict[str, VerifyCommand]
    baseline_commands: tuple[str, ...]
    clauses: dict[str, ClauseSpec]
    success: tuple[str, ...]
    oracle_attempts: int | None
    oracle_timeout_s: float
    expected: Path | None
    eval_repetitions: int

    @property
    def baseline_must(self) -> str:
        return "fail"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.path.name,
            "sha256": self.sha256,
            "workload": self.workload,
            "budget_s": self.budget_s,
            "repetitions": self.repetitions,
            "baseline_must": "fail",
            "baseline_commands": list(self.baseline_commands),
            "clauses": list(self.success),
            "editable": list(self.editable),
            "protected": list(self.protected),
            "toolchain": self.toolchain,
            "verification": [c.to_dict() for c in self.commands.values()],
            "requirements": {c.id: c.requirement for c in self.clauses.values()},
        }


def is_fixture_task(path: Path) -> bool:
    """Whether ``path`` is a fixture task (it names a ``workload``) rather than a backup
    campaign task (``campaigns/speedup.yaml``)."""
    try:
        data = parse_strict(read_bounded(path), path)
    except ScenarioError:
        return False
    return isinstance(data, dict) and "workload" in data


def load_fixture_task(path: Path) -> FixtureTask:
    try:
        raw = read_bounded(path)
        data = parse_strict(raw, path)
    except ScenarioError as error:
        raise TaskError(str(error)) from None
    validate_task(data, path)
    base = path.resolve().parent
    fixture = base / data["fixture"]["directory"]
    if not fixture.is_dir() or fixture.is_symlink():
        raise TaskError(f"{path}: key 'fixture.directory' names {fixture}, not a directory.")
    editable = tuple(data["fixture"]["editable"])
    protected = tuple(data["fixture"]["protected"])
    _check_files(path, fixture, editable, protected)
    commands = {c["id"]: _command(c) for c in data["verification"]}
    if len(commands) != len(data["verification"]):
        raise TaskError(f"{path}: key 'verification' repeats an id; give each command its own.")
    clauses = {
        cid: ClauseSpec(cid, spec["requirement"], spec.get("command"))
        for cid, spec in data["clauses"].items()
    }
    _check_references(path, data, commands, clauses)
    oracle = data.get("oracle") or {}
    calib = data.get("calibration")
    expected = None if calib is None else base / calib["expected"]
    if expected is not None and not expected.is_file():
        raise TaskError(f"{path}: key 'calibration.expected' names {expected}, not a file.")
    return FixtureTask(
        name=data["name"],
        path=path,
        sha256=hashlib.sha256(raw.encode()).hexdigest(),
        raw=raw,
        workload=data["workload"],
        text=data["task"],
        description=data.get("description", ""),
        budget_s=float(data["budget_s"]),
        repetitions=int(data["repetitions"]),
        fixture_dir=fixture,
        editable=editable,
        protected=protected,
        toolchain=data["toolchain"],
        commands=commands,
        baseline_commands=tuple(data["baseline"]["commands"]),
        clauses=clauses,
        success=tuple(data["success"]["clauses"]),
        oracle_attempts=oracle.get("attempts"),
        oracle_timeout_s=float(oracle.get("timeout_s", 60.0)),
        expected=expected,
        eval_repetitions=int((data.get("evaluation") or {}).get("repetitions", 1)),
    )


def _command(spec: dict[str, Any]) -> VerifyCommand:
    return VerifyCommand(
        id=spec["id"],
        argv=tuple(spec["argv"]),
        timeout_s=float(spec["timeout_s"]),
        keep=tuple(spec.get("keep", ("stdout", "stderr"))),
        parse=spec.get("parse", "none"),
        junit_file=spec.get("junit_file"),
    )


def _check_files(
    path: Path, fixture: Path, editable: tuple[str, ...], protected: tuple[str, ...]
) -> None:
    for key, names in (("editable", editable), ("protected", protected)):
        for name in names:
            target = fixture / name
            if not target.is_file() or target.is_symlink():
                raise TaskError(
                    f"{path}: key 'fixture.{key}' names {name}, which is not a regular file "
                    f"of the fixture ({fixture})."
                )
    both = sorted(set(editable) & set(protected))
    if both:
        raise TaskError(f"{path}: {both[0]} is both editable and protected; choose one.")


def _check_references(
    path: Path, data: dict[str, Any], commands: dict[str, VerifyCommand], clauses: dict[str, Any]
) -> None:
    for cid, clause in clauses.items():
        if clause.command is not None and clause.command not in commands:
            raise TaskError(
                f"{path}: key 'clauses.{cid}.command' names {clause.command!r}, which is not "
                "the id of a verification command."
            )
    oracle_clauses = [c for c in clauses.values() if c.oracle]
    if oracle_clauses:
        workload = workloads.get(data["workload"])
        unknown = [c.id for c in oracle_clauses if c.id not in workload.oracle_clauses]
        if unknown:
            raise TaskError(
                f"{path}: key 'clauses.{unknown[0]}' is decided by the oracle, but the workload "
                f"{workload.name!r} decides only {', '.join(workload.oracle_clauses) or 'none'}."
            )
    for cid in data["success"]["clauses"]:
        if cid not in clauses:
            raise TaskError(f"{path}: key 'success.clauses' names {cid}, which is not a clause.")
    for ref in data["baseline"]["commands"]:
        if ref not in commands:
            raise TaskError(
                f"{path}: key 'baseline.commands' names {ref!r}, which is not a verification id."
            )
    for spec in data["verification"]:
        if spec.get("parse") == "junit" and not spec.get("junit_file"):
            raise TaskError(
                f"{path}: key 'verification' command {spec['id']!r} parses junit but names no "
                "junit_file."
            )
