"""Calibrate a task's contract before trusting it: judge every seeded patch of
``seeds/expected.yaml`` and require each to break exactly the clauses named there (the
correct one: none), as the backup lab checks its instrument with seeded clients.

    seeds = load_expected(task)                         # TaskError naming file and key
    check = calibrate(task, seeds, verifier, out_dir, log=log, say=print)
    check.ok, check.met, check.total, check.to_dict()["seeds"]["dotdot-ban"]

``seeds/expected.yaml`` maps each seed's name to the clauses it must break; its patch is
``<name>.patch`` beside the file unless ``patch`` names another::

    seeds:
      correct: {must_fail: [], must_pass: [S1, S2, S3, S4, S5]}
      dotdot-ban: {must_fail: [S1, S4], must_pass: [S2, S3, S5]}
      evalsymlinks-missing: {must_fail: [S1, S4], must_pass: [S2, S5]}   # S3 not asserted

A clause in neither list is not asserted. The short form ``name: {breaks: [S4]}`` asserts
every clause: those named fail, every other one passes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import ScenarioError, TaskError
from lab.host import procs
from lab.workloads.backup.scenario_yaml import parse_strict, read_bounded
from lab.workloads.judge import judge, prepare
from lab.workloads.task import FixtureTask
from lab.workloads.verify import Verifier


@dataclass(frozen=True)
class Seed:
    name: str
    patch: Path
    breaks: frozenset[str]
    #: the clauses whose verdict is asserted (``breaks`` fail, the others pass)
    asserted: frozenset[str]


@dataclass
class Calibration:
    #: seed -> {"expected": [...], "broken": [...], "met": bool, "status_reason": ...}
    seeds: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the digest of everything the seeds' verdicts depend on (lab.workloads.calcache)
    key: str | None = None
    #: the key's inputs by name
    parts: dict[str, Any] = field(default_factory=dict)
    #: where a reused calibration came from (its archive, the archive's SHA-256, its run)
    reused_from: dict[str, Any] | None = None

    @property
    def met(self) -> int:
        return sum(1 for s in self.seeds.values() if s["met"])

    @property
    def total(self) -> int:
        return len(self.seeds)

    @property
    def ok(self) -> bool:
        return self.total > 0 and self.met == self.total

    def first_miss(self) -> str:
        for name, row in self.seeds.items():
            if not row["met"]:
                return (
                    f"the seed {name!r} broke {', '.join(row['broken']) or 'nothing'} where "
                    f"{', '.join(row['expected']) or 'nothing'} was expected"
                )
        return "no seed was judged"

    def to_dict(self) -> dict[str, Any]:
        return {
            "met": self.met,
            "total": self.total,
            "ok": self.ok,
            "seeds": dict(self.seeds),
            "key": self.key,
            "parts": dict(self.parts),
            "reused_from": self.reused_from,
        }

    def counts(self) -> dict[str, Any]:
        """results.json's top-level ``calibration`` of a task run."""
        return {
            "met": self.met,
            "total": self.total,
            "key": self.key,
            "reused_from": self.reused_from,
        }


def load_expected(task: FixtureTask) -> list[Seed]:
    if task.expected is None:
        raise TaskError(
            f"{task.path}: has no 'calibration.expected'; a task's contract must be calibrated "
            "with seeded patches before an agent is judged by it."
        )
    path = task.expected
    try:
        data = parse_strict(read_bounded(path), path)
    except ScenarioError as error:
        raise TaskError(str(error)) from None
    if isinstance(data, dict) and set(data) == {"seeds"}:
        data = data["seeds"]
    if isinstance(data, list):
        data = {row.get("name"): row for row in data if isinstance(row, dict)}
    if not isinstance(data, dict) or not data:
        raise TaskError(f"{path}: must map each seed's name to the clauses it breaks.")
    seeds = []
    for name, row in data.items():
        seeds.append(_seed(path, task, str(name), row))
    if not any(not s.breaks for s in seeds):
        raise TaskError(f"{path}: names no seed that breaks nothing (the correct one).")
    return seeds


def _seed(path: Path, task: FixtureTask, name: str, row: Any) -> Seed:
    if not isinstance(row, dict):
        raise TaskError(f"{path}: key '{name}' must map must_fail/must_pass (or breaks).")
    key = "breaks" if "breaks" in row else "must_fail"
    fails, passes = row.get(key), row.get("must_pass", [])
    if not isinstance(fails, list) or not isinstance(passes, list):
        raise TaskError(f"{path}: key '{name}.{key}' must be a list of clause ids.")
    unknown = [c for c in [*fails, *passes] if c not in task.clauses]
    if unknown:
        raise TaskError(f"{path}: key '{name}' names {unknown[0]}, not a clause of the task.")
    if set(fails) & set(passes):
        raise TaskError(f"{path}: key '{name}' lists a clause as both failing and passing.")
    asserted = set(task.clauses) if key == "breaks" else set(fails) | set(passes)
    patch = path.parent / str(row.get("patch", f"{name}.patch"))
    if not patch.is_file() or patch.is_symlink():
        raise TaskError(f"{path}: the seed {name!r} has no patch file {patch.name}.")
    return Seed(name=name, patch=patch, breaks=frozenset(fails), asserted=frozenset(asserted))


def calibrate(
    task: FixtureTask,
    seeds: list[Seed],
    verifier: Verifier,
    out_dir: Path,
    *,
    log: procs.CommandLog | None,
    say: Callable[[str], None],
) -> Calibration:
    result = Calibration()
    for seed in seeds:
        wanted = ", ".join(sorted(seed.breaks)) or "nothing"
        say(f"Calibration: the seed {seed.name} must break {wanted}")
        with tempfile.TemporaryDirectory(prefix="lab-seed-", dir=verifier.work) as tmp:
            cand = prepare(task, "patch", seed.patch, Path(tmp), log=log)
            judged = judge(task, cand, verifier, out_dir / seed.name, repetitions=1, say=say)
        broken = sorted(c for c in judged.failed(tuple(task.clauses)) if c in seed.asserted)
        if cand.info.problem is not None:
            broken = ["(the patch did not apply)"]
        result.seeds[seed.name] = {
            "patch": seed.patch.name,
            "expected": sorted(seed.breaks),
            "asserted": sorted(seed.asserted),
            "broken": broken,
            "met": broken == sorted(seed.breaks),
            "status_reason": judged.status_reason,
        }
    return result
