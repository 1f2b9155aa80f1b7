"""A fixture task's judgement as typed values (``evaluation`` in a task run's results.json):
per repetition each command's result and each clause's verdict, then the counts and status.

    judged = TaskEvaluation(task={...}, candidate=cand, repetitions=[rep, ...])
    judged.conclude(success=("S1", "S2"))          # status "pass" only when every one passed
    judged.clauses["S1"].to_dict()                 # {"pass": 1, "fail": 0, ...}
    TaskEvaluation.from_dict(judged.to_dict()) == judged

No I/O here: the judge (:mod:`lab.workloads.judge`) fills it; presenters draw it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

from lab import intervals
from lab.model.evaluation import ClauseCounts

ClauseVerdict = Literal["pass", "fail", "not-observed", "not-exercised"]
VERDICTS: tuple[ClauseVerdict, ...] = ("pass", "fail", "not-observed", "not-exercised")


@dataclass(frozen=True)
class Verdict:
    verdict: ClauseVerdict
    reason: str
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"observed": self.verdict, "reason": self.reason, "evidence": list(self.evidence)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(cast(ClauseVerdict, data["observed"]), data["reason"], tuple(data["evidence"]))


@dataclass(frozen=True, kw_only=True)
class CandidateInfo:
    #: tree, patch or fixture (the untouched fixture: a baseline or calibration)
    kind: str
    name: str
    sha256: str
    files_changed: tuple[str, ...]
    outside_editable: tuple[str, ...]
    protected_changed: tuple[str, ...]
    problem: str | None = None

    def findings(self) -> list[str]:
        out = [
            f"protected file {p} was changed (restored before judging)"
            for p in self.protected_changed
        ]
        out += [f"{p} changed, and it is not an editable file" for p in self.outside_editable]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "sha256": self.sha256,
            "files_changed": list(self.files_changed),
            "outside_editable": list(self.outside_editable),
            "protected_changed": list(self.protected_changed),
            "findings": self.findings(),
            "problem": self.problem,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CandidateInfo:
        return cls(
            kind=data["kind"],
            name=data["name"],
            sha256=data["sha256"],
            files_changed=tuple(data["files_changed"]),
            outside_editable=tuple(data["outside_editable"]),
            protected_changed=tuple(data["protected_changed"]),
            problem=data.get("problem"),
        )


@dataclass(frozen=True, kw_only=True)
class RepetitionJudgement:
    index: int
    #: command id -> its result's record (lab.workloads.verify.CommandResult.to_dict)
    commands: dict[str, dict[str, Any]]
    #: the oracle's own record (its figures), or None when the task has no oracle clause
    oracle: dict[str, Any] | None
    verdicts: dict[str, Verdict]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "directory": f"repetitions/r{self.index}",
            "commands": dict(self.commands),
            "oracle": self.oracle,
            "verdicts": {c: v.to_dict() for c, v in sorted(self.verdicts.items())},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RepetitionJudgement:
        return cls(
            index=int(data["index"]),
            commands=dict(data["commands"]),
            oracle=data.get("oracle"),
            verdicts={c: Verdict.from_dict(v) for c, v in data["verdicts"].items()},
        )


@dataclass(kw_only=True)
class TaskEvaluation:
    task: dict[str, Any]
    candidate: CandidateInfo
    repetitions: list[RepetitionJudgement] = field(default_factory=list)
    status: Literal["pass", "fail"] = "fail"
    status_reason: str | None = None
    clauses: dict[str, ClauseCounts] | None = None
    #: the task's calibration as found before judging (lab.workloads.calibrate)
    calibration: dict[str, Any] | None = None

    def failed(self, success: tuple[str, ...]) -> dict[str, str]:
        """Clause -> why it did not pass every repetition (a not-observed is not a pass)."""
        why: dict[str, str] = {}
        if not self.repetitions:
            return {c: "not judged" for c in success}
        for c in success:
            bad = [
                r.verdicts.get(c, Verdict("not-observed", "no verdict")) for r in self.repetitions
            ]
            bad = [v for v in bad if v.verdict not in ("pass", "not-exercised")]
            if bad:
                why[c] = f"{bad[0].verdict}: {bad[0].reason}"
        return why

    def conclude(self, success: tuple[str, ...]) -> None:
        every = sorted({c for r in self.repetitions for c in r.verdicts} | set(success))
        counts = {c: {v: 0 for v in VERDICTS} for c in every}
        for r in self.repetitions:
            for c in every:
                v = r.verdicts.get(c)
                counts[c][v.verdict if v is not None else "not-observed"] += 1
        self.clauses = {
            c: ClauseCounts(
                passed=row["pass"],
                failed=row["fail"],
                not_observed=row["not-observed"],
                not_exercised=row["not-exercised"],
                total=len(self.repetitions),
            )
            for c, row in counts.items()
        }
        failed = self.failed(success)
        if self.candidate.problem is not None:
            self.status, self.status_reason = "fail", self.candidate.problem
        elif failed:
            self.status = "fail"
            self.status_reason = "; ".join(f"{c} {w}" for c, w in failed.items())
        else:
            self.status = "pass"
            self.status_reason = None

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "kind": "task",
            "task": dict(self.task),
            "candidate": self.candidate.to_dict(),
            "status": self.status,
            "repetitions": [r.to_dict() for r in self.repetitions],
        }
        if self.status_reason is not None:
            row["status_reason"] = self.status_reason
        if self.clauses is not None:
            row["clauses"] = {c: n.to_dict() for c, n in self.clauses.items()}
            # each clause's k of N as a 95 % interval (lab.intervals.METHOD), for the reports
            row["intervals"] = {
                c: list(intervals.interval(n.passed, n.total))
                for c, n in self.clauses.items()
                if n.total > 0
            }
            row["interval_method"] = intervals.METHOD
        if self.calibration is not None:
            row["calibration"] = dict(self.calibration)
        return row

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskEvaluation:
        clauses = data.get("clauses")
        return cls(
            task=dict(data["task"]),
            candidate=CandidateInfo.from_dict(data["candidate"]),
            repetitions=[RepetitionJudgement.from_dict(r) for r in data["repetitions"]],
            status=cast(Literal["pass", "fail"], data["status"]),
            status_reason=data.get("status_reason"),
            clauses=None
            if clauses is None
            else {c: ClauseCounts.from_dict(v) for c, v in clauses.items()},
            calibration=data.get("calibration"),
        )
