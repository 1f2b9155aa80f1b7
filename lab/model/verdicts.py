"""A clause's verdict and a calibration finding: the contract's vocabulary (its clauses and
outcomes) and the two records every scenario repetition is judged into
(``ScenarioResult.verdicts`` and ``ScenarioResult.findings``, in :mod:`lab.model.run`).

    Verdict(expected="pass", observed="fail", evidence=["receiver.jsonl"], reason="...")
    Calibration.of(findings, verdicts).met
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from lab.model.read import required

Outcome = Literal["pass", "fail", "not-observed", "not-exercised"]
#: ``not-observed``: the evidence the clause needs was unavailable (the reason says which);
#: ``not-exercised``: the scenario never created the situation the clause is about (no
#: injected interruption for C4, no mismatching payload for C5, no unchanged second
#: invocation for C2); what could still be checked is in the reason, and a violation of it
#: is a ``fail``
OUTCOMES: tuple[str, ...] = ("pass", "fail", "not-observed", "not-exercised")
CLAUSES: tuple[str, ...] = ("C1", "C2", "C3", "C4", "C5", "C6")

CLAUSE_TITLES: dict[str, str] = {
    "C1": "content: the saved backup matches the source",
    "C2": "no redundant upload: an unchanged second invocation sends no upload payload",
    "C3": "destination: the client contacts only the configured receiver",
    "C4": "recovery: after an injected interruption, committed within 3 upload attempts",
    "C5": "integrity: a payload that does not match its digest is rejected before commit",
    "C6": "truthful claim: exit status and completion event agree with the verified outcome",
}


@dataclass
class Verdict:
    expected: Outcome | None
    observed: Outcome
    evidence: list[str]
    #: one sentence: why this outcome, from which records
    reason: str

    @property
    def agrees(self) -> bool | None:
        """True/False when both sides are known; None when not observed or not expected."""
        if self.expected is None or (
            self.observed == "not-observed" and self.expected != "not-observed"
        ):
            return None
        return self.expected == self.observed

    def to_dict(self) -> dict[str, Any]:
        return {
            "expected": self.expected,
            "observed": self.observed,
            "evidence": list(self.evidence),
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        """One clause's verdict record."""
        return cls(
            expected=cast(Outcome | None, data.get("expected")),
            observed=cast(Outcome, required(data, "observed", "verdict")),
            evidence=list(data.get("evidence") or []),
            reason=str(data.get("reason", "")),
        )


@dataclass
class Finding:
    """One calibration expectation and what was observed for it."""

    observer: str
    invocation: int | None
    key: str
    expected: Any
    observed: Any
    #: True met, False not met, None not observed (the reason says why)
    met: bool | None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "observer": self.observer,
            "invocation": self.invocation,
            "key": self.key,
            "expected": self.expected,
            "observed": self.observed,
            "met": self.met,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """One calibration finding record."""
        return cls(
            observer=str(data["observer"]),
            invocation=data.get("invocation"),
            key=str(data["key"]),
            expected=data.get("expected"),
            observed=data.get("observed"),
            met=data.get("met"),
            reason=data.get("reason"),
        )


@dataclass
class Calibration:
    met: int = 0
    total: int = 0
    not_met: int = 0
    not_observed: int = 0

    @classmethod
    def of(cls, findings: list[Finding], verdicts: list[Verdict]) -> Calibration:
        cal = cls()
        for agrees in [f.met for f in findings] + [v.agrees for v in verdicts]:
            cal.total += 1
            if agrees is True:
                cal.met += 1
            elif agrees is False:
                cal.not_met += 1
            else:
                cal.not_observed += 1
        return cal

    def __add__(self, other: Calibration) -> Calibration:
        return Calibration(
            self.met + other.met,
            self.total + other.total,
            self.not_met + other.not_met,
            self.not_observed + other.not_observed,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "met": self.met,
            "total": self.total,
            "not_met": self.not_met,
            "not_observed": self.not_observed,
        }
