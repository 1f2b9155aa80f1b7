"""The trajectory marked: distinct snapshots picked (bounded), new passes, regressions (a
clause that passed and then failed) and plateaus (K judged snapshots without a new pass)."""

from __future__ import annotations

from pathlib import Path

from lab.model.trajectory import JudgedSnapshot, Snapshot, distinct_count, mark, pick

ALL = ("C1", "C2", "C3")


def shot(index: int, fails: tuple[str, ...] = (), status: str = "judged") -> JudgedSnapshot:
    clauses = {} if status != "judged" else {c: "fail" if c in fails else "pass" for c in ALL}
    return JudgedSnapshot(index=index, at_s=float(index), commit=f"{index:040x}",
                          status=status, clauses=clauses)  # fmt: skip


def test_a_regression_is_a_clause_that_passed_then_failed() -> None:
    rows = [shot(1, status="build-failed"), shot(2), shot(3, ("C1",)), shot(4)]
    record = mark(rows, taken=4, distinct=4)
    assert [j.new_passes for j in record.judged] == [(), ALL, (), ()]
    assert record.judged[2].regressions == ("C1",)
    assert record.regressions == (("C1", 2, 3),)
    assert record.plateau_at is None and record.limit is None


def test_a_plateau_is_k_judged_snapshots_without_a_new_pass() -> None:
    rows = [shot(1, ("C3",)), shot(2, ("C3",)), shot(3, ("C3",)), shot(4, ("C3",)), shot(5)]
    record = mark(rows, plateau_k=3, taken=9, distinct=5)
    assert [j.plateau for j in record.judged] == [False, False, False, True, False]
    assert record.plateau_at == 4
    assert record.to_dict()["plateau_k"] == 3


def test_distinct_snapshots_are_picked_evenly_the_last_kept() -> None:
    taken = [Snapshot(i, float(i), f"c{i}", f"t{i // 2}") for i in range(1, 21)]
    assert distinct_count(taken) == 11  # equal trees in a row count once
    picked = pick(taken, limit=4)
    assert len(picked) == 4 and picked[0].index == 1 and picked[-1].tree == "t10"
    record = mark([shot(1)], taken=20, distinct=11)
    assert record.limit == "1 of 11 distinct snapshots judged (at most 6)"
    assert pick([]) == [] and distinct_count([]) == 0


def test_the_plateau_watch_stops_the_agent_after_k_without_a_new_pass(tmp_path: Path) -> None:
    """Judged while the agent works: the newest distinct snapshot each time."""
    import time

    from lab.campaign.snapshots import PlateauWatch

    class Shots:
        def __init__(self) -> None:
            self.taken: list[Snapshot] = []

        def native_patch(self, shot: Snapshot, out: Path) -> bool:
            out.write_text("x")
            return True

    shots = Shots()
    stopped: list[bool] = []
    verdicts = iter([{"C1": "fail"}, {"C1": "pass"}, {"C1": "pass"}, {"C1": "pass"}])
    watch = PlateauWatch(shots, tmp_path, lambda patch, where: ("judged", next(verdicts)),  # type: ignore[arg-type]
                         k=2, stop=lambda: stopped.append(True))  # fmt: skip
    watch.start()
    for n in range(1, 5):
        shots.taken.append(Snapshot(n, float(n), f"c{n}", f"t{n}"))
        deadline = time.monotonic() + 5
        while len(watch.rows) < n and not stopped and time.monotonic() < deadline:
            time.sleep(0.01)
    rows = watch.finish()
    assert stopped == [True] and watch.stopped_at == 4
    assert [r.index for r in rows] == [1, 2, 3, 4]
