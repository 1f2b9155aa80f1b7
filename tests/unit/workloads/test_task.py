"""Fixture task files: the shipped test tasks load; every mistake is one sentence naming the
file and the key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from lab import workloads
from lab.errors import TaskError
from lab.workloads.task import is_fixture_task, load_fixture_task
from tests.conftest import ASSETS, ROOT

SHELL = ASSETS / "tasks" / "shell"
ADDER = ASSETS / "tasks" / "adder"


def test_the_test_tasks_load() -> None:
    task = load_fixture_task(ADDER / "task.yaml")
    assert task.toolchain == "go" and task.editable == ("adder.go",)
    assert task.commands["test"].parse == "go-test-json"
    assert task.clauses["S1"].command == "test" and not task.clauses["S1"].oracle
    assert task.success == ("S1", "S2") and task.baseline_commands == ("test",)
    shell = load_fixture_task(SHELL / "task.yaml")
    assert shell.commands["check"].junit_file == "report.xml"
    assert shell.commands["lint"].keep == ("stderr",)


def test_a_backup_task_is_not_a_fixture_task() -> None:
    assert not is_fixture_task(ROOT / "campaigns" / "speedup.yaml")
    assert is_fixture_task(SHELL / "task.yaml")


def _variant(tmp_path: Path, change: dict[str, object], drop: tuple[str, ...] = ()) -> Path:
    data = yaml.safe_load((SHELL / "task.yaml").read_text())
    for key in drop:
        data.pop(key)
    data.update(change)
    shutil.copytree(SHELL / "fixture", tmp_path / "fixture")
    shutil.copytree(SHELL / "seeds", tmp_path / "seeds")
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"toolchain": "rust"}, "key 'toolchain' must be one of go, none"),
        ({"extra": 1}, "key '(top level)' has a key that is not allowed"),
        (
            {"clauses": {"T1": {"requirement": "x", "command": "nope"}}},
            "key 'clauses.T1.command' names 'nope'",
        ),
        (
            {
                "clauses": {"T1": {"requirement": "x", "oracle": True}},
                "success": {"clauses": ["T1"]},
            },
            "key 'clauses.T1' is decided by the oracle, but the workload 'none' decides only none",
        ),
        ({"success": {"clauses": ["T9"]}}, "key 'success.clauses' names T9"),
        ({"baseline": {"must": "fail", "commands": ["zzz"]}}, "key 'baseline.commands' names"),
        ({"baseline": {"must": "pass", "commands": ["check"]}}, "key 'baseline.must' must be"),
        (
            {
                "fixture": {
                    "directory": "fixture",
                    "editable": ["value.txt"],
                    "protected": ["value.txt"],
                }
            },
            "value.txt is both editable and protected",
        ),
        (
            {"fixture": {"directory": "fixture", "editable": ["../x"], "protected": []}},
            "key 'fixture.editable[0]' does not match the pattern",
        ),
        (
            {"fixture": {"directory": "fixture", "editable": ["missing.go"], "protected": []}},
            "names missing.go, which is not a regular file of the fixture",
        ),
        ({"workload": "nonesuch"}, "no workload is registered as 'nonesuch'"),
    ],
)
def test_each_mistake_is_one_sentence(
    tmp_path: Path, change: dict[str, object], words: str
) -> None:
    path = _variant(tmp_path, change)
    with pytest.raises(TaskError) as caught:
        task = load_fixture_task(path)
        workloads.get(task.workload)
    message = str(caught.value)
    assert words in message, message
    assert message.count("\n") == 0 and message.endswith(".")


def test_a_missing_key_is_named(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="is missing a required key"):
        load_fixture_task(_variant(tmp_path, {}, drop=("verification",)))


def test_the_backup_workload_is_registered_by_reference() -> None:
    backup = workloads.get("backup")
    assert backup.oracle_ref is None and "lab.workloads.backup" in backup.modules
    with pytest.raises(TaskError, match="has no fixture-task oracle"):
        backup.oracle()
    assert workloads.get("safestore").oracle_clauses == ("S3", "S4", "S5")
