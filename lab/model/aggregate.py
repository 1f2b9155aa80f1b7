"""A scenario's repetitions, aggregated (``lab.judge.aggregate`` computes them): k/N per
clause, calibration per repetition, the spread of the untraced client's time, and the
capability/reliability wording. ``to_dict()`` is exactly its row of ``aggregate`` in
``results.json``; ``from_dict()`` reads one back (``lab merge``, ``lab verify``'s readers).

    row = ScenarioAggregate.from_dict(results["aggregate"][0])
    row.clauses["C1"].counts["pass"], row.calibration.no_disagreement_repetitions
    row.wall_s.median if row.wall_s else None        # None: no untraced time was recorded
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.model.timing import Spread

#: the outcomes a clause is counted by (``lab.model.OUTCOMES``, repeated to keep this module
#: free of the run model it is part of)
_OUTCOMES = ("pass", "fail", "not-exercised", "not-observed")


@dataclass(frozen=True)
class ClauseTally:
    """One clause over a scenario's repetitions: how many of each outcome, the expected
    outcome, and how many repetitions agreed with it."""

    counts: dict[str, int]
    expected: str | None
    as_expected: int

    def to_dict(self) -> dict[str, Any]:
        return {**self.counts, "expected": self.expected, "as_expected": self.as_expected}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClauseTally:
        return cls(
            counts={o: int(data.get(o, 0)) for o in _OUTCOMES},
            expected=data.get("expected"),
            as_expected=int(data.get("as_expected", 0)),
        )


@dataclass(frozen=True)
class RepetitionCalibration:
    """How many repetitions met every expectation, how many had no observation disagreeing
    with one (a not-observed expectation is not a disagreement), out of how many."""

    met_repetitions: int
    no_disagreement_repetitions: int
    total: int

    def to_dict(self) -> dict[str, int]:
        return {
            "met_repetitions": self.met_repetitions,
            "no_disagreement_repetitions": self.no_disagreement_repetitions,
            "total": self.total,
        }


@dataclass(frozen=True)
class ScenarioAggregate:
    scenario: str
    repetitions: int
    clauses: dict[str, ClauseTally]
    calibration: RepetitionCalibration
    #: the untraced client's wall and CPU time per repetition; None when none was recorded
    wall_s: Spread | None
    cpu_s: Spread | None
    #: repetitions with an expectation not met or an error
    failed_repetitions: list[int]
    #: "capability demonstrated", "reliability 5/5", … (``lab.judge.aggregate.wording``)
    wording: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "repetitions": self.repetitions,
            "clauses": {name: tally.to_dict() for name, tally in self.clauses.items()},
            "calibration": self.calibration.to_dict(),
            "wall_s": None if self.wall_s is None else self.wall_s.to_dict(),
            "cpu_s": None if self.cpu_s is None else self.cpu_s.to_dict(),
            "failed_repetitions": list(self.failed_repetitions),
            "wording": self.wording,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScenarioAggregate:
        # dict(...) of anything that is not a mapping raises TypeError or ValueError, which
        # the readers (lab merge) turn into one sentence naming the file
        n = int(data.get("repetitions", 0))
        cal = dict(data.get("calibration") or {})
        # documents written before "no_disagreement_repetitions" counted only the met ones
        met = int(cal.get("met_repetitions", 0))
        return cls(
            scenario=str(data["scenario"]),
            repetitions=n,
            clauses={
                str(name): ClauseTally.from_dict(dict(tally))
                for name, tally in dict(data.get("clauses") or {}).items()
            },
            calibration=RepetitionCalibration(
                met_repetitions=met,
                no_disagreement_repetitions=int(cal.get("no_disagreement_repetitions", met)),
                total=int(cal.get("total", n)),
            ),
            wall_s=_spread(data.get("wall_s")),
            cpu_s=_spread(data.get("cpu_s")),
            failed_repetitions=[int(r) for r in data.get("failed_repetitions") or []],
            wording=str(data.get("wording") or ""),
        )


def _spread(data: Any) -> Spread | None:
    if not isinstance(data, Mapping) or data.get("median") is None:
        return None
    return Spread.from_dict(dict(data))
