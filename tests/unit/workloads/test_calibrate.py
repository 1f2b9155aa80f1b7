"""seeds/expected.yaml: the must_fail/must_pass form (a clause in neither is not asserted)
and the short breaks form; mistakes are one sentence naming the file and the seed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lab.errors import TaskError
from lab.workloads.calibrate import load_expected
from lab.workloads.task import load_fixture_task
from tests.conftest import ASSETS, ROOT


def test_safe_stores_seeds_assert_what_they_name() -> None:
    seeds = {
        s.name: s
        for s in load_expected(load_fixture_task(ROOT / "campaigns" / "safe-store" / "task.yaml"))
    }
    assert sorted(seeds) == [
        "check-then-write",
        "correct",
        "dotdot-ban",
        "evalsymlinks-missing",
        "lexical-only",
    ]
    assert seeds["correct"].breaks == frozenset()
    assert seeds["evalsymlinks-missing"].breaks == {"S1", "S4"}
    assert "S3" not in seeds["evalsymlinks-missing"].asserted


def test_the_short_form_asserts_every_clause() -> None:
    seeds = {
        s.name: s
        for s in load_expected(load_fixture_task(ASSETS / "tasks" / "shell" / "task.yaml"))
    }
    assert seeds["three"].breaks == {"T1"} and seeds["three"].asserted == {"T1", "T2"}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("three: {breaks: [T9]}\n", "names T9, not a clause of the task"),
        ("three: {breaks: []}\n", ""),
        ("missing: {breaks: []}\n", "has no patch file missing.patch"),
        ("seeds:\n  three: {must_fail: [T1], must_pass: [T1]}\n", "both failing and passing"),
        ("- 1\n", "must map each seed's name"),
    ],
)
def test_mistakes(tmp_path: Path, text: str, words: str) -> None:
    task_dir = tmp_path / "t"
    shutil.copytree(ASSETS / "tasks" / "shell", task_dir)
    (task_dir / "seeds" / "expected.yaml").write_text(text)
    task = load_fixture_task(task_dir / "task.yaml")
    if not words:
        load_expected(task)  # one seed breaking nothing: loads
        return
    with pytest.raises(TaskError, match=words):
        load_expected(task)
