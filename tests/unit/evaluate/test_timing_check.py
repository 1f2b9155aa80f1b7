"""lab.evaluate.timing: a timed invocation counts only when it would pass a judged pass's
check; a client with a failed round gets no spread from it and no ratio."""

from __future__ import annotations

from pathlib import Path

from lab.evaluate.timing import client_timing, round_problem
from lab.workloads.backup.fixture import write_source
from lab.workloads.backup.store import BACKUP_NAME


def test_round_problem_names_each_failure(tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    digest = write_source(source, seed="t", size=4096)
    store = tmp_path / "store"
    store.mkdir()
    common = {"store": store, "digest": digest, "source": source}
    assert round_problem("first_backup", exit_status=None, timed_out=True, receiver_digest=None,
                         **common) == "first_backup: timed out"  # fmt: skip
    assert "exited 3" in str(round_problem("x", exit_status=3, timed_out=False,
                                           receiver_digest=None, **common))  # fmt: skip
    assert "no backup" in str(round_problem("x", exit_status=0, timed_out=False,
                                            receiver_digest=None, **common))  # fmt: skip
    (store / BACKUP_NAME).write_bytes(b"not the source")
    assert "does not match" in str(round_problem("x", exit_status=0, timed_out=False,
                                                 receiver_digest=digest, **common))  # fmt: skip
    (store / BACKUP_NAME).write_bytes(source.read_bytes())
    assert round_problem("x", exit_status=0, timed_out=False, receiver_digest=digest,
                         **common) is None  # fmt: skip


def test_failed_rounds_are_counted_not_timed() -> None:
    fast_and_wrong = {"first_backup_wall": 0.01, "first_backup_cpu": 0.0, "unchanged_wall": 0.01,
                      "unchanged_cpu": 0.0, "first_backup_exit": 0, "unchanged_exit": 0,
                      "failed": "first_backup: no backup in the receiver's store"}  # fmt: skip
    honest = {**fast_and_wrong, "first_backup_wall": 1.0, "failed": None}
    got = client_timing([fast_and_wrong, honest])
    assert got.failed_rounds == 1 and got.failures == (str(fast_and_wrong["failed"]),)
    wall = got.spreads["first_backup_wall"]
    assert wall is not None and wall.n == 1 and wall.median == 1.0
