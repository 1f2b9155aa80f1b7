"""A verification command's bounded directories in its result, its report line and the
fixture task's evaluation id (no sandbox needed)."""

from __future__ import annotations

from pathlib import Path

from lab.reports.task import command_line, limits_text
from lab.sandbox.boxfs import DiskUse
from lab.workloads.calcache import evaluation_id
from lab.workloads.task import load_fixture_task
from lab.workloads.verify import CommandResult
from tests.conftest import ASSETS

BOUND = 1 << 20


def _result(exit_status: int, used: int) -> CommandResult:
    return CommandResult(
        id="fill",
        exit_status=exit_status,
        timed_out=False,
        wall_s=1.0,
        sandbox_error=None,
        report=None,
        kept=(),
        disk={
            "tmp": DiskUse(bytes_used=used, bytes_max=BOUND, inodes_used=3, inodes_max=100),
            "home": DiskUse(bytes_used=0, bytes_max=BOUND, inodes_used=1, inodes_max=100),
            "gocache": None,
        },
    )


def test_a_filled_directory_is_named_in_the_result_and_the_reason() -> None:
    full = _result(1, BOUND)
    assert full.full == ("tmp",)
    assert full.to_dict()["disk_full"] == ["tmp"]
    assert full.to_dict()["disk"]["gocache"] is None
    assert full.why() == "exited 1 (it filled its bounded tmp: writes beyond got ENOSPC)"
    room = _result(1, BOUND // 2)
    assert room.full == () and room.why() == "exited 1"


def test_the_bounds_are_part_of_the_evaluation_id() -> None:
    task = load_fixture_task(ASSETS / "tasks" / "filler" / "task.yaml")
    limits = {"disk_max": BOUND, "gocache_max_bytes": BOUND}
    same = evaluation_id(task, dict(limits))
    assert evaluation_id(task, limits) == same
    assert evaluation_id(task, {**limits, "gocache_max_bytes": 2 * BOUND}) != same


def test_the_report_lists_every_bound_and_nothing_without_them(tmp_path: Path) -> None:
    assert limits_text(None) == []
    line = limits_text({"gocache_max_bytes": 5, "disk_max": 7})[-1].text
    assert "disk_max 7, gocache_max_bytes 5" in line and "evaluation id" in line
    full = _result(1, BOUND).to_dict()
    assert command_line("fill", full).endswith("filled its bounded tmp (ENOSPC)")
