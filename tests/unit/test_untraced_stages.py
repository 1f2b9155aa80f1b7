"""``benchmarks/untraced_stages.py`` reads a run's stages from its own records: the
timeline's monotonic times turned into the shell's clock with the run's time base, busy-spin's
chain from its first client's start to its last client's exit, the files' times after it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import benchmark

#: the shell's clock when the synthetic process started, and the run's realtime offset
START = 1_800_000_000.0
OFFSET_NS = 1_799_999_000 * 10**9  # monotonic 1,000 s = START


def _mono(seconds_after_start: float) -> int:
    return round((START + seconds_after_start) * 1e9) - OFFSET_NS


def _run_dir(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    run = tmp_path / "run-x"
    run.mkdir()
    base = {"event": "time-base", "t_ns": _mono(0.2)}
    base["realtime_offset"] = {"start": {"offset_ns": OFFSET_NS}}
    rows = [base, *events]
    (run / "timeline.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    commands = [{"started_at": START + 0.25}, {"started_at": START + 0.9}]
    (run / "commands.jsonl").write_text("".join(json.dumps(c) + "\n" for c in commands))
    for name, at in (("results.json", 1.30), ("report.pdf", 1.40)):
        (run / name).write_text("{}")
        os.utime(run / name, (START + at, START + at))
    archive = tmp_path / "run-x.tar.gz"
    archive.write_bytes(b"")
    os.utime(archive, (START + 1.45, START + 1.45))
    return run


def _client(event: str, scenario: str, at: float) -> dict[str, Any]:
    source = "runner" if event == "client-start" else "client"
    return {"source": source, "event": event, "scenario": scenario, "t_ns": _mono(at)}


def test_the_stages_come_from_the_records_on_the_shells_clock(tmp_path: Path) -> None:
    run = _run_dir(
        tmp_path,
        [
            _client("client-start", "busy-spin", 0.30),
            _client("client-start", "baseline", 0.32),
            _client("exit", "baseline", 0.50),
            _client("exit", "busy-spin", 0.65),
            _client("client-start", "busy-spin", 0.66),
            _client("exit", "busy-spin", 1.00),
            _client("client-start", "hash-storm", 0.90),
            _client("exit", "hash-storm", 1.20),
        ],
    )
    got = benchmark("untraced_stages").stages(run, START, START + 1.50)
    expected = {
        "first_command": 0.25,
        "chain_start": 0.30,
        "chain": 0.70,
        "after_chain": 0.20,
        "last_exit": 1.20,
        "results": 0.10,
        "reports": 0.10,
        "archive": 0.05,
        "exit": 0.05,
        "wall": 1.50,
    }
    assert got == pytest.approx(expected, abs=1e-6)


def test_a_run_without_a_whole_busy_spin_chain_is_refused(tmp_path: Path) -> None:
    run = _run_dir(
        tmp_path,
        [_client("client-start", "busy-spin", 0.30), _client("exit", "baseline", 0.5)],
    )
    with pytest.raises(SystemExit, match="no whole busy-spin chain"):
        benchmark("untraced_stages").stages(run, START, START + 1.5)
