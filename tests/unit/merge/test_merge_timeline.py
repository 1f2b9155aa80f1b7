"""A merged run's timeline on one time base: each shard's CLOCK_MONOTONIC rows converted to
CLOCK_REALTIME with that shard's own measured offsets, sorted, the shard's own time and the
offset used kept beside; the first row says what is not measured (the machines' clocks
against each other); a shard with no time base is kept as written, last, and said so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.host.clock import ClockOffset
from lab.merge.timeline import (
    MERGED_TIME_BASE,
    merged_rows,
    offset_for,
    write_merged_timeline,
)

SECOND = 1_000_000_000


def _shard(
    path: Path, *, boot_ns: int, offset_ns: int, drift_ns: int, events: list[tuple[int, str]]
) -> Path:
    """A shard's timeline: its monotonic clock started ``boot_ns`` ago; realtime minus
    monotonic is ``offset_ns`` at the start and ``offset_ns + drift_ns`` ten seconds on."""
    start = {"offset_ns": offset_ns, "uncertainty_ns": 150, "at_ns": boot_ns}
    end = {"offset_ns": offset_ns + drift_ns, "uncertainty_ns": 90, "at_ns": boot_ns + 10 * SECOND}
    rows: list[dict[str, Any]] = [
        {
            "t_ns": boot_ns,
            "source": "runner",
            "event": "time-base",
            "time_base": "CLOCK_MONOTONIC",
            "realtime_offset": {"start": start, "end": end},
            "uncertainty_ns": 150 + abs(drift_ns),
        }
    ]
    rows += [
        {"t_ns": boot_ns + at, "source": "runner", "event": name, "scenario": "baseline"}
        for at, name in events
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_offset_is_interpolated_between_the_two_measurements() -> None:
    start = ClockOffset(1000, 10, 0)
    end = ClockOffset(2000, 10, 100)
    assert offset_for(50, start, end) == 1500
    assert offset_for(-5, start, end) == 1000 and offset_for(500, start, end) == 2000
    assert offset_for(7, start, start) == 1000


def test_shards_are_put_on_realtime_each_with_its_own_offset(tmp_path: Path) -> None:
    # shard 1's machine booted long ago, shard 2's recently: their monotonic times are
    # incomparable (shard 2's are far smaller), their realtime ones are not
    one = _shard(
        tmp_path / "1.jsonl",
        boot_ns=900_000 * SECOND,
        offset_ns=1_000_000 * SECOND,
        drift_ns=2_000,
        events=[(1 * SECOND, "a1"), (5 * SECOND, "b1")],
    )
    two = _shard(
        tmp_path / "2.jsonl",
        boot_ns=50 * SECOND,
        offset_ns=1_900_000 * SECOND - 50 * SECOND + 3 * SECOND,
        drift_ns=0,
        events=[(0, "a2"), (1 * SECOND, "b2")],
    )
    rows, header = merged_rows([(1, one), (2, two)])
    assert header["time_base"] == MERGED_TIME_BASE and rows[0] is header
    body = rows[1:]
    # realtime: a1 at 1,900,001 s, a2 1,900,003 s, b2 1,900,004 s, b1 1,900,005 s
    assert [r["event"] for r in body] == ["a1", "a2", "b2", "b1"]
    assert [r["t_ns"] for r in body] == sorted(r["t_ns"] for r in body)
    for r in body:
        assert r["t_ns"] == r["shard_t_ns"] + r["shard_offset_ns"]
    a1 = body[0]
    assert a1["shard"] == 1 and a1["shard_t_ns"] == 900_001 * SECOND
    # 1 s into a 10 s bracket whose offset drifted 2,000 ns: 200 ns of it
    assert a1["shard_offset_ns"] == 1_000_000 * SECOND + 200
    # what each shard measured is kept; what no one measured is said
    assert [b["shard"] for b in header["shards"]] == [1, 2]
    assert all(b["converted"] for b in header["shards"])
    assert header["uncertainty_ns"] == 150 + 2_000
    assert header["across_shards_uncertainty_ns"] is None
    assert "not measured" in header["across_shards"]


def test_a_shard_without_a_time_base_is_kept_last_and_said_so(tmp_path: Path) -> None:
    one = _shard(
        tmp_path / "1.jsonl", boot_ns=SECOND, offset_ns=SECOND, drift_ns=0, events=[(0, "a")]
    )
    old = tmp_path / "2.jsonl"
    old.write_text(json.dumps({"ts": 1, "source": "lab"}) + "\n")
    dest = tmp_path / "timeline.jsonl"
    summary = write_merged_timeline([(1, one), (2, old)], dest)
    rows = [json.loads(line) for line in dest.read_text().splitlines()]
    assert rows[0]["event"] == "time-base" and rows[0]["unconverted_rows"] == 1
    assert rows[-1] == {"shard": 2, "ts": 1, "source": "lab"}
    assert summary["shards"]["2"]["converted"] is False
    assert "names no time base" in summary["shards"]["2"]["reason"]
    assert summary["shards"]["1"]["converted"] is True
