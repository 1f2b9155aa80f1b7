"""The calibration key (lab.workloads.calcache): the same inputs give the same digest, and a
change to any of them (task file, fixture, expected.yaml, a seed's patch) gives another;
a pointer that names a missing or changed archive is not reused, and says why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lab.workloads.calcache import POINTERS, calibration_key, find_reusable, remember
from lab.workloads.calibrate import Calibration, load_expected
from lab.workloads.task import load_fixture_task
from tests.conftest import ASSETS

SHELL = ASSETS / "tasks" / "shell"
#: the bounds a verification command runs under (their part of the key)
LIMITS = {"disk_max": 1 << 20, "gocache_max_bytes": 1 << 28}


def key_of(task_dir: Path) -> tuple[str, dict[str, object]]:
    task = load_fixture_task(task_dir / "task.yaml")
    key = calibration_key(task, load_expected(task), LIMITS, log=None)
    return key.digest, key.parts


def test_the_key_changes_with_every_input(tmp_path: Path) -> None:
    task = tmp_path / "task"
    shutil.copytree(SHELL, task)
    digest, parts = key_of(task)
    assert key_of(task)[0] == digest and len(digest) == 64
    assert {"task", "fixture", "expected", "seeds", "lab_source", "lab_version", "toolchain",
            "strace", "kernel", "evaluation_id"} <= set(parts)  # fmt: skip
    seen = {digest}
    for rel in ("seeds/correct.patch", "seeds/expected.yaml", "fixture/value.txt", "task.yaml"):
        with (task / rel).open("a") as handle:
            handle.write("\n# changed\n" if rel.endswith(".yaml") else "\n")
        changed, _ = key_of(task)
        assert changed not in seen, rel
        seen.add(changed)


def test_a_pointer_to_a_missing_or_changed_archive_is_not_reused(tmp_path: Path) -> None:
    task = load_fixture_task(SHELL / "task.yaml")
    key = calibration_key(task, load_expected(task), LIMITS, log=None)
    archive = tmp_path / "evaluation-x.tar.gz"
    archive.write_bytes(b"not an archive")
    check = Calibration(seeds={"correct": {"met": True}}, key=key.digest, parts=dict(key.parts))
    assert remember(tmp_path, check, archive, "evaluation-x")
    pointer = json.loads((tmp_path / POINTERS / f"{key.digest}.json").read_text())
    assert pointer["archive"] == archive.name and len(pointer["archive_sha256"]) == 64
    said: list[str] = []
    archive.write_bytes(b"not an archive either")
    assert find_reusable(tmp_path, key, signer=None, say=said.append) is None
    assert "changed since its calibration was kept" in said[-1]
    archive.unlink()
    assert find_reusable(tmp_path, key, signer=None, say=said.append) is None
    assert "is gone" in said[-1]


def test_only_a_fresh_met_calibration_is_kept(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(b"x")
    missed = Calibration(seeds={"correct": {"met": False}}, key="k" * 64)
    reused = Calibration(seeds={"correct": {"met": True}}, key="k" * 64, reused_from={"a": 1})
    unkeyed = Calibration(seeds={"correct": {"met": True}})
    for check in (missed, reused, unkeyed):
        assert not remember(tmp_path, check, archive, "a")
    assert not remember(tmp_path, Calibration(seeds={"c": {"met": True}}, key="k"), None, "a")
    assert not (tmp_path / POINTERS).exists()


def test_the_key_changes_with_the_verification_bounds() -> None:
    task = load_fixture_task(SHELL / "task.yaml")
    seeds = load_expected(task)
    same = calibration_key(task, seeds, dict(LIMITS), log=None).digest
    wider = calibration_key(task, seeds, {**LIMITS, "disk_max": 2 << 20}, log=None).digest
    assert calibration_key(task, seeds, LIMITS, log=None).digest == same != wider
