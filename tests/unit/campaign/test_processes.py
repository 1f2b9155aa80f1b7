"""The agent's processes as evidence: verification runs counted from the execs, what it
left in HOME and /tmp listed without following links, and the console's wording."""

from __future__ import annotations

import os
from pathlib import Path

from lab.campaign.watch import list_left
from lab.model.processes import (
    ExecRow,
    ProcessRecord,
    verification_commands,
    verification_runs,
    verification_words,
)


def row(*argv: str, status: int | None = 0) -> ExecRow:
    signal = None if status is not None else 9
    return ExecRow(pid=1, parent=0, path=f"/usr/bin/{argv[0]}", argv=argv, start_s=0.0,
                   end_s=1.0, exit_status=status, signal=signal)  # fmt: skip


def test_verification_runs_and_their_exit_statuses() -> None:
    execs = [
        row("sh", "-c", "make -C native"),
        row("/usr/bin/make", "-C", "native", status=2),
        row("make", "-C", "native", "clean"),
        row("make", "-C", "other"),
        row("make", "-C", "native", status=None),
    ]
    runs = verification_runs(execs, verification_commands({}))
    assert runs == ({"command": "make -C native", "runs": 3, "exit_statuses": [2, 0, None]},)
    record = ProcessRecord(execs=tuple(execs), exec_count=5, verification=runs)
    assert verification_words(record) == "make -C native ran 3× (exit 2, 0, killed)"


def test_a_task_s_own_verification_commands_are_used() -> None:
    task = {"verification": [{"argv": ["go", "test", "-race", "./..."]}, "go vet ./..."]}
    assert verification_commands(task) == [("go", "test", "-race", "./..."), ("go", "vet", "./...")]
    runs = verification_runs([row("go", "vet", "./...", status=1)], verification_commands(task))
    assert [r["runs"] for r in runs] == [0, 1]


def test_processes_not_observed_say_why_never_zero() -> None:
    record = ProcessRecord(error="bpftrace is not installed")
    assert verification_words(record) == "processes not observed: bpftrace is not installed"
    assert record.to_dict()["exec_count"] is None


def test_what_was_left_is_listed_bounded_and_links_never_followed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cache" / "deep").mkdir(parents=True)
    (home / ".cache" / "deep" / "f").write_bytes(b"12345")
    outside = tmp_path / "outside"
    (outside / "secret").mkdir(parents=True)
    os.symlink(outside, home / "link")
    found, more = list_left(home)
    assert not more
    assert found == [
        {"path": ".cache", "type": "dir", "bytes": None},
        {"path": "link", "type": "symlink", "bytes": None},
        {"path": ".cache/deep", "type": "dir", "bytes": None},
        {"path": ".cache/deep/f", "type": "file", "bytes": 5},
    ]
    for n in range(10):
        (home / f"n{n}").write_text("")
    found, more = list_left(home, limit=4)
    assert len(found) == 4 and more
