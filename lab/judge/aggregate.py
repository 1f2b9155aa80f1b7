"""Repetition aggregates: k/N per clause, calibration per repetition, median and spread of
the client's time. One run demonstrates capability; reliability needs repetitions.

    rows = aggregate(run.scenarios)   # one ScenarioAggregate per scenario, in run order
    rows[0].wording                   # "reliability 5/5" or "capability demonstrated"
"""

from __future__ import annotations

import statistics

from lab.model import CLAUSES, OUTCOMES, ScenarioResult
from lab.model.aggregate import ClauseTally, RepetitionCalibration, ScenarioAggregate
from lab.model.timing import Spread

#: fewest repetitions for which the lab will word a result as reliability
RELIABILITY_MIN_N = 3


def spread(values: list[float | None]) -> Spread | None:
    """Median, min and max (and how many values) of the values that were recorded."""
    clean = [v for v in values if v is not None]
    if not clean:
        return None
    return Spread(
        median=round(statistics.median(clean), 6),
        min=round(min(clean), 6),
        max=round(max(clean), 6),
        n=len(clean),
    )


def _client_times(s: ScenarioResult) -> tuple[float | None, float | None]:
    """Untraced client wall and CPU time of one repetition, summed over its invocations."""
    primary = s.primary
    if primary is None or primary.collector != "none" or not primary.invocations:
        return None, None
    wall = sum(i.claim.wall_s for i in primary.invocations)
    cpus = [i.claim.cpu_s for i in primary.invocations]
    cpu = None if any(c is None for c in cpus) else sum(c for c in cpus if c is not None)
    return wall, cpu


def aggregate(scenarios: list[ScenarioResult]) -> list[ScenarioAggregate]:
    by_name: dict[str, list[ScenarioResult]] = {}
    for s in scenarios:
        by_name.setdefault(s.name, []).append(s)
    rows: list[ScenarioAggregate] = []
    for name, reps in by_name.items():
        clauses: dict[str, ClauseTally] = {}
        for clause in CLAUSES:
            counts = {o: 0 for o in OUTCOMES}
            agreed = 0
            expected = None
            for s in reps:
                v = s.verdicts.get(clause)
                if v is None:
                    continue
                counts[v.observed] += 1
                expected = v.expected
                agreed += 1 if v.agrees is True else 0
            clauses[clause] = ClauseTally(counts, expected, agreed)
        met = sum(
            1
            for s in reps
            if s.error is None and s.calibration.not_met == 0 and s.calibration.not_observed == 0
        )
        matched = sum(1 for s in reps if s.error is None and s.calibration.not_met == 0)
        walls = [w for w, _ in map(_client_times, reps) if w is not None]
        cpus = [c for _, c in map(_client_times, reps) if c is not None]
        rows.append(
            ScenarioAggregate(
                scenario=name,
                repetitions=len(reps),
                clauses=clauses,
                calibration=RepetitionCalibration(met, matched, len(reps)),
                wall_s=spread(list(walls)),
                cpu_s=spread(list(cpus)),
                failed_repetitions=[s.repetition for s in reps if s.calibration.not_met or s.error],
                wording=wording(len(reps), matched),
            )
        )
    return rows


def wording(n: int, k: int) -> str:
    """Capability for one repetition, reliability k/N only from RELIABILITY_MIN_N on (``k``
    of the ``n`` repetitions had no observation disagreeing with an expectation)."""
    if n == 1:
        return "capability demonstrated" if k == 1 else "capability not demonstrated"
    if n < RELIABILITY_MIN_N:
        return f"{k}/{n} repetitions as expected (too few for a reliability claim)"
    return f"reliability {k}/{n}"
