"""``benchmarks/time_to_evidence.py`` prints what it measured against issue 25's goals: the
head side's median meets a goal, misses it (said loudly), or was not measured (never
"met")."""

from __future__ import annotations

from typing import Any

from tests.conftest import benchmark


def _side(median: float | None) -> dict[str, Any]:
    if median is None:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": median, "min": median - 1, "max": median + 1, "n": 3}


def test_the_table_says_which_goal_is_met_missed_or_not_measured() -> None:
    tte = benchmark("time_to_evidence")
    table = {
        "base": "a54d0ed",
        "head": "fe894bd",
        "rounds": 3,
        "untraced run --all": {"base": _side(1.7), "head": _side(2.4),
                               "ratio_head_to_base": 1.41,
                               "runs_not_calibrated": {"base": 0, "head": 1}},
        "traced run --all": {"base": _side(58.0), "head": _side(25.4), "ratio_head_to_base": 0.44,
                             "runs_not_calibrated": {"base": 0, "head": 0}},
        "evaluate correct": {"base": _side(31.7), "head": _side(19.5), "ratio_head_to_base": 0.62,
                             "runs_not_calibrated": {"base": 0, "head": 0}},
        "bpftrace added wall per invocation (ms), traced": {"base": _side(None),
                                                            "head": _side(None)},
        # a median within the goal whose largest run is not: the half-width's goal is for
        # every run
        "interval half-width (%), first backup wall": {"base": _side(6.0), "head": _side(4.5)},
    }  # fmt: skip
    lines = tte.table_lines(table)
    assert lines[0] == "base a54d0ed, head fe894bd, 3 measured round(s)"
    rows = {line.split("  ")[0]: line for line in lines[2:]}
    assert rows["untraced run --all"].endswith("<= 1.0 s: NOT MET ({'base': 0, 'head': 1} run(s) "
                                               "not calibrated)")  # fmt: skip
    assert "2.4 (1.4 … 3.4)" in rows["untraced run --all"]
    assert rows["traced run --all"].endswith("<= 12 s: NOT MET")
    assert rows["evaluate correct"].endswith("<= 20 s: met")
    added = rows["bpftrace added wall per invocation (ms), traced"]
    assert added.endswith("<= 50 ms: not measured") and " - " in added
    width = rows["interval half-width (%), first backup wall"]
    assert width.endswith("<= 5 % in every run: NOT MET")
    table["interval half-width (%), first backup wall"]["head"]["max"] = 4.9
    again = {line.split("  ")[0]: line for line in tte.table_lines(table)[2:]}
    assert again["interval half-width (%), first backup wall"].endswith("in every run: met")


def test_an_evaluation_is_calibrated_by_its_instrument_check_and_its_verdict() -> None:
    tte = benchmark("time_to_evidence")
    run = {"calibration": {"not_met": 2}}
    assert tte.calibration_of("untraced run --all", run) == (2, "")

    def evaluation(status: str, ok: bool) -> dict[str, Any]:
        return {"calibration": {"not_met": 32},
                "evaluation": {"status": status, "instrument_check": {"ok": ok}}}  # fmt: skip

    # a hanging candidate's own expectations not met are its verdict's evidence
    assert tte.calibration_of("hanging evaluate", evaluation("fail", True)) == (
        0, "verdict fail, instrument check ok")  # fmt: skip
    assert tte.calibration_of("hanging evaluate", evaluation("pass", True)) == (
        1, "verdict pass (NOT fail), instrument check ok")  # fmt: skip
    assert tte.calibration_of("evaluate correct", evaluation("refused", False)) == (
        2, "verdict refused (NOT pass), instrument check NOT OK")  # fmt: skip
