"""The timing record's ratios and their intervals, from alternated rounds (no process run)."""

from __future__ import annotations

from typing import Any

from lab.evaluate import timing
from lab.judge.aggregate import spread
from lab.model.evaluation import ClientTiming


def _rows(walls: list[float]) -> list[dict[str, Any]]:
    return [{"first_backup_wall": w} for w in walls]


def _spreads(rows: list[dict[str, Any]]) -> ClientTiming:
    walls = [r["first_backup_wall"] for r in rows]
    return ClientTiming(spreads={"first_backup_wall": spread(walls)}, nonzero_exits=0)


def test_the_share_above_the_floor_is_stored_with_its_interval() -> None:
    floor = [0.040 + 0.002 * (i % 4) for i in range(12)]
    rows = {
        "baseline": _rows([f + 0.020 for f in floor]),
        "candidate": _rows([f + 0.008 for f in floor]),
        "floor": _rows(floor),
    }
    spreads = {name: _spreads(r) for name, r in rows.items()}
    ratio: dict[str, float | None] = {}
    bars: dict[str, list[float] | None] = {}
    timing._above_floor(rows, spreads, "t", ratio, bars)
    assert ratio[timing.ABOVE_FLOOR] == 0.4
    bar = bars[timing.ABOVE_FLOOR]
    assert bar is not None and bar[0] <= 0.4 <= bar[1]


def test_no_share_above_the_floor_is_undefined_never_a_number() -> None:
    same = _rows([0.05] * 5)
    rows = {"baseline": same, "candidate": _rows([0.04] * 5), "floor": _rows([0.06] * 5)}
    spreads = {name: _spreads(r) for name, r in rows.items()}
    ratio: dict[str, float | None] = {}
    bars: dict[str, list[float] | None] = {}
    timing._above_floor(rows, spreads, "t", ratio, bars)
    assert ratio == {timing.ABOVE_FLOOR: None} and bars == {timing.ABOVE_FLOOR: None}
