"""Timing rounds cannot be told apart from judged passes, and are checked like them
(lab.evaluate.timing): the hostile ``timing-cheat`` client reads /proc/self/cgroup and, when
it looks timed, says "done" without a backup; ``store-writer`` never makes a real backup.
Neither may come out of the rounds with a speed figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.evaluate import timing
from lab.sandbox import Sandbox
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("sandbox_ready")

BASELINE = ROOT / "native" / "backup-client"


def test_a_client_that_looks_for_a_timing_round_finds_none(
    hostile: dict[str, Path], tmp_path: Path, sandbox: Sandbox
) -> None:
    # 3 rounds that time everything, then 4 (a target no interval meets) that time the
    # first backup alone, in a cell of two invocations (lab.evaluate.timing.later_rounds)
    got = timing.alternate(
        {"baseline": BASELINE, "candidate": hostile["timing-cheat"]},
        rounds=3,
        max_rounds=7,
        target=1e-9,
        size=65536,
        workdir=tmp_path,
        sandbox=sandbox,
        timeout=30.0,
    )
    cand = got.clients["candidate"]
    # it could not tell: it backed up in every round, each round checked and counted
    assert cand.failed_rounds == 0, cand.failures
    spread = cand.spreads["first_backup_wall"]
    assert got.rounds == 7 and spread is not None and spread.n == 7
    unchanged = cand.spreads["unchanged_wall"]
    assert unchanged is not None and unchanged.n == 3
    assert got.ratio is not None and got.ratio["first_backup_wall"] is not None
    assert got.rounds_rule is not None and got.rounds_rule.stopped == "cap"


def test_a_round_without_a_backup_is_failed_never_fast(
    hostile: dict[str, Path], tmp_path: Path, sandbox: Sandbox
) -> None:
    got = timing.alternate(
        {"baseline": BASELINE, "candidate": hostile["store-writer"]},
        rounds=2,
        size=65536,
        workdir=tmp_path,
        sandbox=sandbox,
        timeout=30.0,
    )
    cand = got.clients["candidate"]
    assert cand.failed_rounds == 2
    assert all("no backup" in reason for reason in cand.failures), cand.failures
    assert all(s is None for s in cand.spreads.values())
    assert got.clients["baseline"].failed_rounds == 0
    assert got.ratio is not None and set(got.ratio.values()) == {None}


def test_a_cell_closes_beside_the_next_warm_up_never_beside_a_timed_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round's cell is closed on a thread while the next round's cell opens
    (lab.evaluate.timing_cell.Closing); nothing runs in a cell (its warm-up, a timed invocation)
    until the last cell's removal has ended, and every cell is gone when the rounds return.
    A cell's removal is slowed here (0.3 s before it starts), so that an invocation not held
    back for it would run beside it."""
    import json
    import os
    import secrets
    import time

    from lab.host.procs import CommandLog
    from lab.sandbox.cell import PassCell

    close = PassCell.close
    closing: list[tuple[float, float]] = []  # every cell's close, from its start to its end

    def slow_close(cell: PassCell) -> None:
        start = time.time()
        time.sleep(0.3)
        close(cell)
        closing.append((start, time.time()))

    monkeypatch.setattr(PassCell, "close", slow_close)

    log = CommandLog(tmp_path / "commands.jsonl")
    opened = Sandbox.open(f"test-{os.getpid()}-{secrets.token_hex(3)}", log=log)
    try:
        opened.use_slots(2)  # as lab evaluate's sandbox has (one user per pass at once)
        got = timing.alternate(
            {"baseline": BASELINE, "candidate": BASELINE},
            rounds=3,
            size=65536,
            workdir=tmp_path / "work",
            sandbox=opened,
            timeout=30.0,
        )
    finally:
        opened.close()
    assert all(c.failed_rounds == 0 for c in got.clients.values())
    rows = [json.loads(line) for line in log.path.read_text().splitlines()]
    timed = [r for r in rows if r["purpose"].startswith("untraced timing (sandboxed)")]
    warm = [r for r in rows if r["purpose"].startswith("untimed warm-up")]
    assert len(timed) == 3 * 2 * 2 and len(warm) == 3 * 2
    # every cell was closed before alternate returned
    assert len(closing) == 3 * 2
    for run in timed + warm:
        start, end = run["started_at"], run["started_at"] + run["duration_s"]
        for c_start, c_end in closing:
            assert c_end <= start or c_start >= end, f"a cell closed beside {run['purpose']!r}"
    # and the closes did run beside the next cells' opening: a namespace was made during one
    made = [r for r in rows if r["purpose"].startswith("network namespace for one pass")]
    assert any(c_start < m["started_at"] < c_end for m in made for c_start, c_end in closing)
