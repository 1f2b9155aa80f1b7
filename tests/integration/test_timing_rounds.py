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
    got = timing.alternate(
        {"baseline": BASELINE, "candidate": hostile["timing-cheat"]},
        rounds=2,
        size=65536,
        workdir=tmp_path,
        sandbox=sandbox,
        timeout=30.0,
    )
    cand = got.clients["candidate"]
    # it could not tell: it backed up in every round, each round checked and counted
    assert cand.failed_rounds == 0, cand.failures
    spread = cand.spreads["first_backup_wall"]
    assert spread is not None and spread.n == 2
    assert got.ratio is not None and got.ratio["first_backup_wall"] is not None


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
