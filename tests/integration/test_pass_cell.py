"""A pass's cell (lab.sandbox.cell) as the runner uses it: opened with its namespace and the
client's bounded HOME and /tmp made side by side, gone when it closes, and saying once, while
the client runs, that it runs (the runner begins what it makes beside the passes then)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from lab.sandbox import Sandbox
from lab.sandbox.boxfs import mounts_under

pytestmark = pytest.mark.usefixtures("sandbox_ready")

SLEEP = Path("/bin/sleep")


def test_an_open_cell_has_its_namespace_and_bounded_directories(sandbox: Sandbox) -> None:
    with sandbox.pass_cell("opened", client=SLEEP, invocations=1) as cell:
        assert cell.netns.path.exists()
        # the loopback is up inside the namespace before any endpoint listens in it
        shown = subprocess.run(
            ["ip", "-n", cell.netns_name, "link", "show", "lo"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "UP" in shown.split(">")[0]
        mounted = set(mounts_under(cell.scratch))
        assert {cell.home(1), cell.tmp()} <= mounted
        for path in (cell.home(1), cell.tmp()):
            assert path.stat().st_uid == cell.user.uid
        scratch, namespace = cell.scratch, cell.netns.path
    assert not namespace.exists() and not scratch.exists()
    assert not mounts_under(scratch)


def test_started_is_said_once_while_the_client_runs(sandbox: Sandbox, tmp_path: Path) -> None:
    said: list[float] = []
    with sandbox.pass_cell("started", client=SLEEP, invocations=1) as cell:
        t0 = time.monotonic()
        outcome = cell.run(
            1,
            [str(cell.client), "0.4"],
            wrap=lambda argv: argv,
            timeout_s=30,
            stdout=tmp_path / "stdout",
            stderr=tmp_path / "stderr",
            purpose="a client that sleeps 0.4 s",
            started=lambda: said.append(time.monotonic() - t0),
        )
        ended = time.monotonic() - t0
    assert outcome.exit_status == 0 and outcome.main_pid is not None
    assert len(said) == 1
    # said while the client slept: not before the jail started, not after the client ended
    assert 0 < said[0] < ended - 0.3


def test_started_is_never_said_when_no_client_runs(sandbox: Sandbox, tmp_path: Path) -> None:
    said: list[float] = []
    with sandbox.pass_cell("never", client=SLEEP, invocations=1) as cell:
        cell.run(
            1,
            [str(cell.client), "0.1"],
            # the wrapper replaces the jail: bwrap never reports a client
            wrap=lambda argv: ["/bin/true"],
            timeout_s=10,
            stdout=tmp_path / "stdout",
            stderr=tmp_path / "stderr",
            purpose="no client at all",
            started=lambda: said.append(0.0),
        )
    assert said == []
