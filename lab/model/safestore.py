"""The safe-store oracle's results (``lab.workloads.safestore.judge_candidate``): one
verdict per clause (S3, S4, S5) with its reason and its evidence (paths relative to the
oracle's ``out`` directory), and the figures measured. No I/O: round-tripped through
``to_dict``/``from_dict``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

Verdict = Literal["pass", "fail", "not-observed"]
VERDICTS: tuple[str, ...] = ("pass", "fail", "not-observed")
CLAUSES: tuple[str, ...] = ("S3", "S4", "S5")
Figure = int | float | str | None


@dataclass(frozen=True)
class ClauseResult:
    verdict: Verdict
    reason: str
    #: paths relative to the oracle's ``out`` directory
    evidence: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "evidence": list(self.evidence)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClauseResult:
        return cls(
            verdict=cast(Verdict, str(data["verdict"])),
            reason=str(data["reason"]),
            evidence=tuple(str(e) for e in data.get("evidence", ())),
        )


@dataclass(frozen=True)
class SafeStoreJudgement:
    clauses: Mapping[str, ClauseResult]
    figures: Mapping[str, Figure] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "clauses": {k: self.clauses[k].to_dict() for k in sorted(self.clauses)},
            "figures": {k: self.figures[k] for k in sorted(self.figures)},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SafeStoreJudgement:
        clauses = {str(k): ClauseResult.from_dict(v) for k, v in data["clauses"].items()}
        figures: dict[str, Figure] = {}
        for key, value in data.get("figures", {}).items():
            if value is not None and not isinstance(value, (int, float, str)):
                raise ValueError(f"figure {key!r} is not a number, a string or null")
            figures[str(key)] = value
        return cls(clauses=clauses, figures=figures)
