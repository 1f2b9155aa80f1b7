"""The timing record's ratios and their intervals, from alternated rounds (no process run)."""

from __future__ import annotations

from typing import Any

from lab.evaluate import timing, timing_cell
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
    ratio: dict[str, float | None] = {}
    bars: dict[str, list[float] | None] = {}
    timing._above_floor(rows, "t", ratio, bars)
    assert ratio[timing.ABOVE_FLOOR] == 0.4
    bar = bars[timing.ABOVE_FLOOR]
    assert bar is not None and bar[0] <= 0.4 <= bar[1]


def test_no_share_above_the_floor_is_undefined_never_a_number() -> None:
    same = _rows([0.05] * 5)
    rows = {"baseline": same, "candidate": _rows([0.04] * 5), "floor": _rows([0.06] * 5)}
    ratio: dict[str, float | None] = {}
    bars: dict[str, list[float] | None] = {}
    timing._above_floor(rows, "t", ratio, bars)
    assert ratio == {timing.ABOVE_FLOOR: None} and bars == {timing.ABOVE_FLOOR: None}


def test_the_share_above_the_floor_is_taken_over_the_rounds_all_three_timed() -> None:
    # the floor ran in the first 12 rounds only (later_rounds without the share deciding);
    # the 12 later rounds were slower for both clients: they are not mixed into the share
    floor = [0.040] * 12 + [None] * 12
    rows = {
        "baseline": _rows([0.060] * 12 + [0.090] * 12),
        "candidate": _rows([0.048] * 12 + [0.080] * 12),
        "floor": [{"first_backup_wall": f} if f else {} for f in floor],
    }
    ratio: dict[str, float | None] = {}
    bars: dict[str, list[float] | None] = {}
    timing._above_floor(rows, "t", ratio, bars)
    assert ratio[timing.ABOVE_FLOOR] == 0.4


def test_a_failed_round_leaves_the_share_above_the_floor_na() -> None:
    walls = _rows([0.050] * 12)
    failed = _rows([0.040] * 12)
    failed[3] = {"first_backup_wall": 0.001, "failed": "first_backup: no backup"}
    rows = {"baseline": walls, "candidate": failed, "floor": _rows([0.030] * 12)}
    ratio: dict[str, float | None] = {}
    bars: dict[str, list[float] | None] = {}
    timing._above_floor(rows, "t", ratio, bars, unchecked=True)
    assert ratio == {timing.ABOVE_FLOOR: None} and bars == {timing.ABOVE_FLOOR: None}


def test_the_stored_ratio_is_taken_within_each_round() -> None:
    # rounds 5-7 ran under a load that doubled both clients' walls alike; the candidate was
    # 10 % faster in four rounds of seven and as fast in three. Its median wall (20 ms) is
    # the baseline's, so a ratio of the medians would say 1.0; within the rounds it is 0.9
    load = [1, 1, 1, 1, 2, 2, 2]
    own = [0.9, 1.0, 0.9, 0.9, 1.0, 0.9, 1.0]
    base = [0.020 * f for f in load]
    cand = [b * r for b, r in zip(base, own, strict=True)]
    rows = {"baseline": _rows(base), "candidate": _rows(cand)}
    spreads = {name: _spreads(r) for name, r in rows.items()}
    ratio, bars = timing._ratios(rows, spreads, "t", only=("first_backup_wall",))
    assert ratio is not None and bars is not None
    assert ratio["first_backup_wall"] == 0.9
    bar = bars["first_backup_wall"]
    assert bar is not None and bar[0] <= 0.9 <= bar[1] <= 1.0
    # the other metrics have no values in these rows: N/A, never a number
    assert ratio["first_backup_cpu"] is None and bars["first_backup_cpu"] is None


# --- the rounds rule: at least the least, more until the interval is narrow, at most the cap


#: (client, the invocations it timed) of every round the last _fake_rounds ran
TIMED: list[tuple[str, tuple[str, ...]]] = []


def _fake_rounds(monkeypatch: Any, noise: Any) -> list[str]:
    """Replace a round by made-up figures: ``noise(name, index)`` is the client's first
    backup wall for its ``index``-th round (the other metrics follow it); returns the
    order the rounds ran in."""
    ran: list[str] = []
    timed: list[tuple[str, tuple[str, ...]]] = []
    TIMED[:] = []
    timed = TIMED

    def one_round(client: Any, *args: Any) -> dict[str, Any]:
        name = client.name
        invocations = args[-1]  # the invocations this round times
        index = sum(1 for n in ran if n == name)
        ran.append(name)
        timed.append((name, invocations))
        wall = noise(name, index)
        if wall is None:
            return {m: None for m in timing.METRICS} | {"failed": "first_backup: exited 1"}
        row: dict[str, Any] = {"failed": None}
        for label in invocations:
            row |= {f"{label}_wall": wall, f"{label}_cpu": wall / 2, f"{label}_exit": 0}
        return row

    monkeypatch.setattr(timing, "_one_round", one_round)
    return ran


def _alternate(tmp_path: Any, *, floor: bool = False, **kwargs: Any) -> Any:
    from pathlib import Path

    clients = {"baseline": Path("baseline"), "candidate": Path("candidate")}
    if floor:
        clients["floor"] = Path("floor")
    return timing.alternate(clients, size=64, workdir=tmp_path, **kwargs)


def _jitter(spread_of: Any) -> Any:
    """Walls of 20 ms with a seeded relative jitter of ``spread_of(index)``."""
    import random

    rng = random.Random(7)
    return lambda name, index: 0.020 * (1 + spread_of(index) * (rng.random() - 0.5))


def test_a_quiet_machine_stops_at_the_least_rounds(tmp_path: Any, monkeypatch: Any) -> None:
    ran = _fake_rounds(monkeypatch, _jitter(lambda i: 0.01))
    record = _alternate(tmp_path, rounds=12, max_rounds=36)
    rule = record.rounds_rule
    assert record.rounds == 12 and len(ran) == 24 and ran[:4] == ["baseline", "candidate"] * 2
    assert rule.stopped == "target" and rule.min_rounds == 12 and rule.max_rounds == 36
    width = rule.half_widths["first_backup_wall"]
    assert width is not None and width <= timing.TARGET_HALF_WIDTH
    # the looks between blocks bootstrap the deciding metric alone; the record has them all
    assert all(record.ratio_interval[m] is not None for m in timing.METRICS)
    # no round ran after the least: the record names none
    assert rule.later_rounds == {} and "after the first" not in rule.sentence(record.rounds)


def test_a_wide_interval_adds_rounds_until_it_is_within_the_target(
    tmp_path: Any, monkeypatch: Any
) -> None:
    # the first rounds are noisy (±25 %), the later ones quiet (±0.5 %): the interval
    # narrows only once enough quiet rounds have run
    _fake_rounds(monkeypatch, _jitter(lambda i: 0.5 if i < 12 else 0.01))
    record = _alternate(tmp_path, rounds=12, max_rounds=60)
    rule = record.rounds_rule
    assert rule.stopped == "target"
    assert 12 < record.rounds < 60 and (record.rounds - 12) % timing.STEP == 0
    bar, ratio = record.ratio_interval["first_backup_wall"], record.ratio["first_backup_wall"]
    # the interval kept is the one the rule stopped on
    assert abs((bar[1] - bar[0]) / 2 / ratio - rule.half_widths["first_backup_wall"]) < 1e-4
    assert rule.half_widths["first_backup_wall"] <= timing.TARGET_HALF_WIDTH
    # every client ran every round: the alternation is kept in the added blocks
    assert all(c.spreads["first_backup_wall"].n == record.rounds for c in record.clients.values())
    # the added rounds timed the first backup alone, what the deciding ratio needs; the
    # unchanged invocation's ratio and spreads are the least rounds'
    both = ("first_backup", "unchanged")
    assert TIMED[:24] == [("baseline", both), ("candidate", both)] * 12
    assert set(TIMED[24:]) == {("baseline", ("first_backup",)), ("candidate", ("first_backup",))}
    assert all(c.spreads["unchanged_wall"].n == 12 for c in record.clients.values())
    assert record.ratio_interval["unchanged_wall"] is not None
    assert rule.later_rounds == {"baseline": ("first_backup",), "candidate": ("first_backup",)}
    assert "after the first 12 timed only the first backup of the baseline and the " in (
        rule.sentence(record.rounds)
    )


def test_a_noisy_machine_stops_at_the_cap_and_says_so(tmp_path: Any, monkeypatch: Any) -> None:
    _fake_rounds(monkeypatch, _jitter(lambda i: 1.0))
    record = _alternate(tmp_path, rounds=12, max_rounds=20)
    rule = record.rounds_rule
    assert record.rounds == 20 and rule.stopped == "cap"
    assert rule.half_widths["first_backup_wall"] > timing.TARGET_HALF_WIDTH
    assert "at most 20" in rule.sentence(record.rounds) and "±" in rule.sentence(record.rounds)


def test_without_a_cap_the_rounds_are_fixed(tmp_path: Any, monkeypatch: Any) -> None:
    _fake_rounds(monkeypatch, _jitter(lambda i: 1.0))
    record = _alternate(tmp_path, rounds=12)
    assert record.rounds == 12 and record.rounds_rule.stopped == "fixed"
    assert record.rounds_rule.sentence(12).startswith("12 rounds (a fixed number")


def test_a_failed_round_stops_the_rounds_and_leaves_the_ratio_na(
    tmp_path: Any, monkeypatch: Any
) -> None:
    walls = _jitter(lambda i: 1.0)
    _fake_rounds(monkeypatch, lambda n, i: None if (n, i) == ("candidate", 3) else walls(n, i))
    record = _alternate(tmp_path, rounds=12, max_rounds=36)
    assert record.rounds == 12 and record.rounds_rule.stopped == "failed-round"
    assert record.ratio["first_backup_wall"] is None
    assert record.rounds_rule.half_widths == {"first_backup_wall": None}


def test_a_speed_goal_metric_decides_too(tmp_path: Any, monkeypatch: Any) -> None:
    import random

    rng = random.Random(3)
    _fake_rounds(monkeypatch, lambda n, i: 0.020 * (1 + 0.01 * (rng.random() - 0.5)))
    # the wall is quiet; a second deciding metric that is undefined stops the rounds there
    record = _alternate(
        tmp_path, rounds=12, max_rounds=36, metrics=("first_backup_wall", timing.ABOVE_FLOOR)
    )
    assert record.rounds_rule.stopped == "undefined" and record.rounds == 12
    assert record.rounds_rule.metrics == ("first_backup_wall", timing.ABOVE_FLOOR)


def test_the_floor_runs_in_the_added_rounds_only_when_its_share_decides(
    tmp_path: Any, monkeypatch: Any
) -> None:
    noisy = _jitter(lambda i: 0.3)  # ±15 %: wider than the target at 20 rounds
    walls = {"baseline": 0.060, "candidate": 0.056, "floor": 0.020}
    _fake_rounds(monkeypatch, lambda n, i: walls[n] * noisy(n, i) / 0.020)
    record = _alternate(
        tmp_path, rounds=12, max_rounds=20, floor=True, metrics=("first_backup_wall",)
    )
    floor = record.clients["floor"]
    assert record.rounds > 12 and floor.spreads["first_backup_wall"].n == 12
    assert [n for n, _ in TIMED[36:]] == ["baseline", "candidate"] * (record.rounds - 12)
    assert record.ratio["first_backup_wall_above_floor"] is not None

    _fake_rounds(monkeypatch, lambda n, i: walls[n] * noisy(n, i) / 0.020)
    metrics = ("first_backup_wall", timing.ABOVE_FLOOR, "unchanged_cpu")
    record = _alternate(tmp_path, rounds=12, max_rounds=20, floor=True, metrics=metrics)
    assert record.rounds == 20  # the noise keeps every interval wide: the cap
    both = ("first_backup", "unchanged")
    assert all(c.spreads["unchanged_wall"].n == record.rounds for c in record.clients.values())
    assert set(TIMED) == {("baseline", both), ("candidate", both), ("floor", both)}


def test_the_rounds_rule_keeps_what_the_later_rounds_timed() -> None:
    from lab.model.timing import RoundsRule

    rule = RoundsRule(
        min_rounds=12,
        max_rounds=36,
        target_half_width=0.05,
        metrics=("first_backup_wall",),
        stopped="cap",
        half_widths={"first_backup_wall": 0.06},
        later_rounds={"baseline": ("first_backup",), "candidate": ("first_backup",)},
    )
    assert RoundsRule.from_dict(rule.to_dict()) == rule
    assert rule.later_sentence(12) == ""  # no round after the least: nothing to say
    # which figures the least rounds alone have
    assert rule.least_only(36, "baseline", "unchanged_wall")
    assert not rule.least_only(36, "baseline", "first_backup_cpu")
    assert rule.least_only(36, "floor", "first_backup_wall")  # the floor ran in none
    assert not rule.least_only(12, "baseline", "unchanged_wall")
    assert rule.later_sentence(36) == (
        "the 24 rounds after the first 12 timed only the first backup of the baseline and the "
        "candidate, what the deciding ratios need"
    )
    # a record made before the later rounds were lean reads back as timing everything
    old = {k: v for k, v in rule.to_dict().items() if k != "later_rounds"}
    assert RoundsRule.from_dict(old).later_rounds == {}
    assert "timed only" not in RoundsRule.from_dict(old).sentence(36)


# --- a cell closed beside the next round's set-up (Closing)


def test_closing_settles_the_cell_handed_last_and_raises_what_its_close_raised() -> None:
    import threading

    import pytest

    closing = timing_cell.Closing()
    closing.settle()  # nothing handed: nothing to wait for
    order: list[str] = []
    release = threading.Event()

    def slow() -> None:
        release.wait(5)
        order.append("first closed")

    closing.hand(slow)
    order.append("handed")
    release.set()
    closing.settle()
    assert order == ["handed", "first closed"]

    def broken() -> None:
        raise OSError("umount: target is busy")

    closing.hand(broken)
    with pytest.raises(OSError, match="target is busy"):
        closing.settle()
    closing.settle()  # raised once, then nothing is left to raise

    # a failed close met when the next cell is handed: that cell is closed all the same
    closing.hand(broken)
    closed: list[str] = []
    with pytest.raises(OSError, match="target is busy"):
        closing.hand(lambda: closed.append("next cell"))
    assert closed == ["next cell"]
