from __future__ import annotations

from typing import Any

from lab.judge.aggregate import aggregate, wording
from lab.model import Finding, ScenarioResult, Verdict


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
    return rows[0]


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
    assert wording({"repetitions": 3, "calibration": {"no_disagreement_repetitions": 0}}) == (
        "reliability 0/3"
    )
