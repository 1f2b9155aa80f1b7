from __future__ import annotations

from typing import Any

from lab.judge.aggregate import aggregate, wording
from lab.model import Finding, ScenarioResult, Verdict
from lab.model.aggregate import ScenarioAggregate


def rep(n: int, c2: str, *, met: bool = True) -> ScenarioResult:
    s = ScenarioResult("baseline", n, "", "scenarios/baseline.yaml", [])
    s.verdicts = {
        "C1": Verdict("pass", "pass", ["verifier"], ""),
        "C2": Verdict("pass", c2, ["receiver"], ""),  # type: ignore[arg-type]
    }
    s.findings = [Finding("receiver", 1, "connections", 2, 2 if met else 3, met)]
    return s


def row(reps: list[ScenarioResult]) -> dict[str, Any]:
    rows = aggregate(reps)
    assert len(rows) == 1
    # the typed row and its results.json form say the same, and the form reads back
    assert ScenarioAggregate.from_dict(rows[0].to_dict()) == rows[0]
    return rows[0].to_dict()


def test_k_of_n_per_clause_and_calibration() -> None:
    r = row([rep(1, "pass"), rep(2, "fail", met=False), rep(3, "pass"), rep(4, "not-observed")])
    assert r["repetitions"] == 4
    assert r["clauses"]["C1"]["pass"] == 4
    assert r["clauses"]["C2"] | {} == {
        "pass": 2,
        "fail": 1,
        "not-observed": 1,
        "not-exercised": 0,
        "expected": "pass",
        "as_expected": 2,
    }
    # rep 2 disagreed (C2 fail, finding not met); rep 4's not-observed is no disagreement
    assert r["calibration"]["no_disagreement_repetitions"] == 3
    assert r["failed_repetitions"] == [2]
    assert r["wording"] == "reliability 3/4"


def test_wording_never_says_reliable_for_one_or_two_runs() -> None:
    assert row([rep(1, "pass")])["wording"] == "capability demonstrated"
    assert row([rep(1, "fail", met=False)])["wording"] == "capability not demonstrated"
    two = row([rep(1, "pass"), rep(2, "pass")])["wording"]
    assert "too few for a reliability claim" in two and "reliability 2" not in two
    assert wording(3, 0) == "reliability 0/3"


def test_an_aggregate_row_written_before_its_wording_still_reads_and_reports() -> None:
    from lab.model import RunResult
    from lab.reports.repetitions import aggregate_table

    old = {
        "scenario": "baseline",
        "repetitions": 3,
        "clauses": {"C1": {"pass": 3, "expected": "pass", "as_expected": 3}},
        "calibration": {"met_repetitions": 2, "total": 3},
        "wall_s": {"median": 0.02, "min": 0.01, "max": 0.03, "n": 3},
        "cpu_s": None,
        "failed_repetitions": [2],
    }
    row = ScenarioAggregate.from_dict(old)
    assert row.calibration.no_disagreement_repetitions == 2  # then counted as the met ones
    assert row.clauses["C1"].counts["fail"] == 0 and row.cpu_s is None and row.wording == ""
    run = RunResult("r", "", "", {}, {}, {}, aggregate=[row])
    [cells] = aggregate_table(run).rows
    assert cells[0] == "baseline" and "2/3 as expected: reliability 2/3" in cells[-3]
    assert "failed repetition(s): 2" in cells[-3]
