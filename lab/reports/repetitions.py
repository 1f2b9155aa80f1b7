"""Rows about repetitions: k/N per clause, the capability/reliability wording, the
client's untraced time over repetitions, and each repetition of a repeated scenario.

    repetition_wording(2, 3)          # "reliability 2/3"
    aggregate_table(run)              # one row per scenario from run.aggregate
    repetition_table(run, "baseline") # one row per repetition

One run shows capability, never reliability (the second seed article).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lab.model import (
    CLAUSES,
    RunResult,
)
from lab.reports.table import NOT_RECORDED, Table, fmt, fmt_seconds, fmt_spread

SINGLE_RUN_STATEMENT = (
    "Each scenario ran once: every result in this report shows capability (what happened "
    "in one run), never reliability. Use --repetitions N (N >= 3) for a reliability claim."
)


def repetition_wording(k: int, n: int) -> str:
    """How strong a claim ``k`` successes out of ``n`` repetitions support (second article:
    one run shows capability, never reliability)."""
    if n <= 0:
        return "no repetition ran"
    if n == 1:
        return "capability demonstrated" if k >= 1 else "capability not demonstrated"
    if n == 2:
        return f"{k}/2 repetitions (too few for a reliability claim)"
    return f"reliability {k}/{n}"


def clause_counts_cell(counts: Mapping[str, Any] | None, n: int) -> str:
    if not counts:
        return NOT_RECORDED
    parts = [
        f"{int(counts.get(outcome, 0))}/{n} {outcome}"
        for outcome in ("pass", "fail", "not-observed", "not-exercised")
        if int(counts.get(outcome, 0))
    ]
    as_expected = counts.get("as_expected")
    if isinstance(as_expected, int) and counts.get("expected") and as_expected != n:
        parts.append(f"({as_expected}/{n} as expected: {counts['expected']})")
    return "\n".join(parts) if parts else f"none of {n}"


def aggregate_table(run: RunResult) -> Table:
    """One row per scenario from ``run.aggregate`` (``lab.judge.aggregate``): k/N per clause and
    the aggregate's own capability/reliability wording."""
    rows = []
    for agg in run.aggregate:
        n = agg.repetitions
        # repetitions with no observation disagreeing with its expectation
        k, total = agg.calibration.no_disagreement_repetitions, agg.calibration.total
        # a document written before aggregates carried their wording: say it from k/N
        words = agg.wording or f"{k}/{total} as expected: {repetition_wording(k, total)}"
        failed = agg.failed_repetitions
        rows.append(
            [
                agg.scenario,
                str(n),
                *(
                    clause_counts_cell(agg.clauses[c].to_dict() if c in agg.clauses else None, n)
                    for c in CLAUSES
                ),
                words + (f"; failed repetition(s): {fmt(failed)}" if failed else ""),
                fmt_spread(agg.wall_s),
                fmt_spread(agg.cpu_s),
            ]
        )
    notes = [
        "Each repetition starts from a fresh state and failed repetitions keep all their "
        "evidence. One run shows capability, never reliability; reliability is stated from "
        "3 repetitions on.",
        "Timing: median (min - max) of the client's untraced wall and CPU time per repetition.",
    ]
    return Table(
        [
            "scenario",
            "N",
            *CLAUSES,
            "calibration over repetitions",
            "wall median (range)",
            "CPU median (range)",
        ],
        rows,
        notes,
    )


def repetition_table(run: RunResult, name: str) -> Table:
    rows = []
    for s in run.scenarios:
        if s.name != name:
            continue
        cal = s.calibration
        untraced = s.primary
        wall = sum(i.claim.wall_s for i in untraced.invocations) if untraced else None
        rows.append(
            [
                str(s.repetition),
                *(s.verdicts[c].observed if c in s.verdicts else NOT_RECORDED for c in CLAUSES),
                f"{cal.met}/{cal.total} met, {cal.not_met} not met, "
                f"{cal.not_observed} not observed",
                fmt_seconds(wall),
                s.error or "-",
            ]
        )
    return Table(
        ["repetition", *CLAUSES, "calibration", "client wall (all invocations)", "error"], rows
    )


def has_repetitions(run: RunResult) -> bool:
    """True when any scenario ran more than once (then the aggregate table means something)."""
    return bool(repeated_names(run)) or any(agg.repetitions > 1 for agg in run.aggregate)


def repeated_names(run: RunResult) -> list[str]:
    names: list[str] = []
    for s in run.scenarios:
        if s.name not in names and sum(1 for t in run.scenarios if t.name == s.name) > 1:
            names.append(s.name)
    return names
