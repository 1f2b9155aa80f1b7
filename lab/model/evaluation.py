"""The candidate evaluation record (``evaluation`` in ``results.json``) as a typed tree.

``to_dict()`` is exactly the JSON the lab writes (keys absent where nothing was recorded, as
they always were); ``from_dict()`` reads such a record back, keeping keys it does not know in
``extra`` so that nothing recorded is hidden from the reports.

    evaluation = Evaluation(frozen=frozen, candidate=candidate.describe(), status="fail", ...)
    evaluation.clauses["C2"].passed, evaluation.timing.ratio["first_backup_wall"]
    Evaluation.from_dict(json.loads(text)["evaluation"]).to_dict()   # the same dict

No I/O lives here, and nothing from the lab but the candidate kinds: ``lab.model`` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, cast

from lab.model.timing import ClientTiming, RoundsRule, Spread, Timing

__all__ = ["ClientTiming", "RoundsRule", "Spread", "Timing"]  # defined in lab.model.timing

#: what the candidate is: a patch to native/, a source tree with a Makefile, an executable
CandidateKind = Literal["patch", "source-dir", "binary"]
#: the candidate's verified result: ``pass`` only when every clause passed in every
#: repetition; ``refused`` when the instrument check failed; a build failure is a result
EvaluationStatus = Literal["pass", "fail", "refused", "build-failed", "patch-failed"]
BuildStatus = Literal["prebuilt", "built", "patch-failed", "build-failed"]


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


# --- what was frozen before the candidate ran ------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Fixture:
    generator: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"generator": self.generator, "size": self.size}


@dataclass(frozen=True, kw_only=True)
class EvaluationLimits:
    invocation_timeout_s: float
    build_timeout_s: float
    #: the least untraced timing rounds
    timing_runs: int
    #: the most (``lab.evaluate.timing``'s rounds rule: more rounds, in blocks, until every
    #: deciding interval is within ``timing_target_half_width``); None in records made
    #: before the rule, whose timings ran exactly ``timing_runs``
    timing_max_runs: int | None = None
    timing_target_half_width: float | None = None
    #: the ratios whose intervals decide when the rounds stop
    timing_metrics: tuple[str, ...] | None = None
    #: the sandbox's bounds of every invocation, judged or timed (``SandboxSettings``):
    #: pids_max, memory_max, disk_max, disk_inodes_max, linger_grace_s, output_head_bytes,
    #: output_tail_bytes; empty in records made before they were frozen
    sandbox: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        rule: dict[str, Any] = {}
        if self.timing_max_runs is not None:
            rule = {
                "timing_max_runs": self.timing_max_runs,
                "timing_target_half_width": self.timing_target_half_width,
                "timing_metrics": list(self.timing_metrics or ()),
            }
        return {
            "invocation_timeout_s": self.invocation_timeout_s,
            "build_timeout_s": self.build_timeout_s,
            "timing_runs": self.timing_runs,
            **rule,
            **self.sandbox,
        }

    @classmethod
    def from_dict(cls, limits: dict[str, Any]) -> EvaluationLimits:
        own = (
            "invocation_timeout_s",
            "build_timeout_s",
            "timing_runs",
            "timing_max_runs",
            "timing_target_half_width",
            "timing_metrics",
        )
        cap, target = limits.get("timing_max_runs"), limits.get("timing_target_half_width")
        metrics = limits.get("timing_metrics")
        return cls(
            invocation_timeout_s=float(limits["invocation_timeout_s"]),
            build_timeout_s=float(limits["build_timeout_s"]),
            timing_runs=int(limits["timing_runs"]),
            timing_max_runs=_optional_int(cap),
            timing_target_half_width=_optional_float(target),
            timing_metrics=None if metrics is None else tuple(str(m) for m in metrics),
            sandbox={str(k): v for k, v in limits.items() if k not in own},
        )


@dataclass(frozen=True, kw_only=True)
class FrozenEvaluation:
    """Everything that defines the judgement, hashed into ``evaluation_id`` before the
    candidate runs (``evaluation.json`` in the run directory)."""

    evaluation_id: str
    lab_version: str
    #: repository-relative path -> SHA-256 of each file that defines "passing"
    files: dict[str, str]
    fixture: Fixture
    repetitions: int
    limits: EvaluationLimits

    def to_dict(self) -> dict[str, Any]:
        return {
            "evaluation_id": self.evaluation_id,
            "lab_version": self.lab_version,
            "files": dict(self.files),
            "fixture": self.fixture.to_dict(),
            "repetitions": self.repetitions,
            "limits": self.limits.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FrozenEvaluation:
        fixture, limits = data["fixture"], data["limits"]
        return cls(
            evaluation_id=str(data["evaluation_id"]),
            lab_version=str(data["lab_version"]),
            files={str(k): str(v) for k, v in data["files"].items()},
            fixture=Fixture(generator=str(fixture["generator"]), size=int(fixture["size"])),
            repetitions=int(data["repetitions"]),
            limits=EvaluationLimits.from_dict(limits),
        )


# --- the candidate ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PatchStep:
    """``patch -p1`` applied to a copy of ``native/``."""

    exit_status: int | None
    #: "native/" for a patch made inside native/, "repository root" for ``git diff`` output
    applied_in: str


@dataclass(frozen=True, kw_only=True)
class MakeStep:
    """``make`` in the candidate's workspace; the logs are run-relative paths."""

    exit_status: int | None
    timed_out: bool
    duration_s: float
    log: str
    stderr: str


@dataclass(frozen=True, kw_only=True)
class BuildRecord:
    """How the candidate became an executable, step by step; ``status`` once decided."""

    status: BuildStatus | None = None
    patch: PatchStep | None = None
    make: MakeStep | None = None
    #: why a build that exited 0 still failed
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {}
        if self.patch is not None:
            row["patch_exit_status"] = self.patch.exit_status
            row["patch_applied_in"] = self.patch.applied_in
        if self.make is not None:
            row.update(
                exit_status=self.make.exit_status,
                timed_out=self.make.timed_out,
                duration_s=self.make.duration_s,
                log=self.make.log,
                stderr=self.make.stderr,
            )
        if self.status is not None:
            row["status"] = self.status
        if self.why is not None:
            row["why"] = self.why
        return row

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildRecord:
        patch = make = None
        if "patch_applied_in" in data:
            patch = PatchStep(
                exit_status=_optional_int(data.get("patch_exit_status")),
                applied_in=str(data["patch_applied_in"]),
            )
        if "duration_s" in data:
            make = MakeStep(
                exit_status=_optional_int(data.get("exit_status")),
                timed_out=bool(data["timed_out"]),
                duration_s=float(data["duration_s"]),
                log=str(data["log"]),
                stderr=str(data["stderr"]),
            )
        status = data.get("status")
        return cls(
            status=cast(BuildStatus, status) if status is not None else None,
            patch=patch,
            make=make,
            why=data.get("why"),
        )


@dataclass(frozen=True, kw_only=True)
class CandidateRecord:
    """The candidate's identity: what was given (by name and digest) and what ran."""

    kind: CandidateKind
    input_name: str
    input_sha256: str
    #: None when nothing could be built
    binary_sha256: str | None
    build: BuildRecord

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "input_name": self.input_name,
            "input_sha256": self.input_sha256,
            "binary_sha256": self.binary_sha256,
            "build": self.build.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CandidateRecord:
        return cls(
            kind=cast(CandidateKind, data["kind"]),
            input_name=str(data["input_name"]),
            input_sha256=str(data["input_sha256"]),
            binary_sha256=data.get("binary_sha256"),
            build=BuildRecord.from_dict(data.get("build") or {}),
        )


# --- the judgement ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class InstrumentCheck:
    """Whether the lab caught the seeded defects on this machine, with these collectors:
    checked in this run, or kept in an earlier run's archive under the same key and reused
    (``lab.evaluate.instrument``)."""

    scenarios: tuple[str, ...]
    #: seeded scenario -> clause -> observed outcome (each must be "fail")
    caught: dict[str, dict[str, str]]
    ok: bool
    #: the digest of everything the check's outcome depends on (None: a record before keys)
    key: str | None = None
    #: the key's inputs by name
    parts: dict[str, Any] = field(default_factory=dict)
    #: where a reused check came from (its archive, the archive's SHA-256, its run, what
    #: verified it); None: checked in this run
    reused_from: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "scenarios": list(self.scenarios),
            "caught": {name: dict(row) for name, row in self.caught.items()},
            "ok": self.ok,
        }
        if self.key is not None:  # absent: a record made before checks were kept
            row |= {"key": self.key, "parts": dict(self.parts), "reused_from": self.reused_from}
        return row

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InstrumentCheck:
        reused = data.get("reused_from")
        return cls(
            scenarios=tuple(data["scenarios"]),
            caught={
                str(n): {str(c): str(o) for c, o in row.items()}
                for n, row in data["caught"].items()
            },
            ok=bool(data["ok"]),
            key=None if data.get("key") is None else str(data["key"]),
            parts=dict(data.get("parts") or {}),
            reused_from=None if reused is None else dict(reused),
        )


@dataclass(frozen=True, kw_only=True)
class ClauseCounts:
    """One clause's outcomes over every repetition of every condition."""

    passed: int
    failed: int
    not_observed: int
    total: int
    #: repetitions whose scenario never created the clause's situation (never a pass)
    not_exercised: int = 0

    @property
    def exercised(self) -> int:
        return self.total - self.not_exercised

    def to_dict(self) -> dict[str, int]:
        return {
            "pass": self.passed,
            "fail": self.failed,
            "not-observed": self.not_observed,
            "not-exercised": self.not_exercised,
            "total": self.total,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClauseCounts:
        return cls(
            passed=int(data["pass"]),
            failed=int(data["fail"]),
            not_observed=int(data["not-observed"]),
            not_exercised=int(data.get("not-exercised", 0)),  # records before it existed
            total=int(data["total"]),
        )


@dataclass(frozen=True, kw_only=True)
class ContractViolation:
    """One way one invocation broke client contract v1 (docs/client-contract.md)."""

    condition: str
    repetition: int
    #: the pass (collector) the invocation ran in
    pass_name: str
    invocation: int
    problem: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "repetition": self.repetition,
            "pass": self.pass_name,
            "invocation": self.invocation,
            "problem": self.problem,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContractViolation:
        return cls(
            condition=str(data["condition"]),
            repetition=int(data["repetition"]),
            pass_name=str(data["pass"]),
            invocation=int(data["invocation"]),
            problem=str(data["problem"]),
        )


@dataclass(frozen=True, kw_only=True)
class ClientContract:
    honoured: bool
    #: the first violations (at most 50); ``violation_count`` counts them all
    violations: tuple[ContractViolation, ...]
    violation_count: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "honoured": self.honoured,
            "violations": [v.to_dict() for v in self.violations],
            "violation_count": self.violation_count,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClientContract:
        return cls(
            honoured=bool(data["honoured"]),
            violations=tuple(ContractViolation.from_dict(v) for v in data["violations"]),
            violation_count=int(data["violation_count"]),
        )


@dataclass(frozen=True, kw_only=True)
class DiagnosticRow:
    """Unnecessary-work diagnostics of one invocation, from the traced passes (no threshold;
    None where the collector named in ``missing`` did not run)."""

    condition: str
    repetition: int
    invocation: int
    source_bytes_read: int | None
    #: source bytes read ÷ file size
    read_ratio: float | None
    hash_file_calls: int | None
    cpu_s_untraced: float | None
    missing: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "repetition": self.repetition,
            "invocation": self.invocation,
            "source_bytes_read": self.source_bytes_read,
            "read_ratio": self.read_ratio,
            "hash_file_calls": self.hash_file_calls,
            "cpu_s_untraced": self.cpu_s_untraced,
            "missing": list(self.missing),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DiagnosticRow:
        return cls(
            condition=str(data["condition"]),
            repetition=int(data["repetition"]),
            invocation=int(data["invocation"]),
            source_bytes_read=_optional_int(data.get("source_bytes_read")),
            read_ratio=_optional_float(data.get("read_ratio")),
            hash_file_calls=_optional_int(data.get("hash_file_calls")),
            cpu_s_untraced=_optional_float(data.get("cpu_s_untraced")),
            missing=tuple(data.get("missing") or ()),
        )


# --- the whole record ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """A candidate evaluation: what was frozen, the candidate, and how it was judged. The
    optional parts are None where the evaluation stopped before them (a failed build has
    no clauses; a refusal has the instrument check and nothing after it)."""

    frozen: FrozenEvaluation
    candidate: CandidateRecord
    status: EvaluationStatus
    status_reason: str | None = None
    instrument_check: InstrumentCheck | None = None
    #: clause -> outcomes over every repetition of every condition
    clauses: dict[str, ClauseCounts] | None = None
    client_contract: ClientContract | None = None
    diagnostics: tuple[DiagnosticRow, ...] | None = None
    timing: Timing | None = None
    #: why there is no timing although the candidate was judged (it hung)
    timing_skipped: str | None = None
    #: recorded fields this model does not know (kept, and listed by the reports)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def evaluation_id(self) -> str:
        return self.frozen.evaluation_id

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            **self.extra,
            **self.frozen.to_dict(),
            "candidate": self.candidate.to_dict(),
            "status": self.status,
        }
        if self.status_reason is not None:
            row["status_reason"] = self.status_reason
        if self.instrument_check is not None:
            row["instrument_check"] = self.instrument_check.to_dict()
        if self.clauses is not None:
            row["clauses"] = {c: counts.to_dict() for c, counts in self.clauses.items()}
        if self.client_contract is not None:
            row["client_contract"] = self.client_contract.to_dict()
        if self.diagnostics is not None:
            row["diagnostics"] = [d.to_dict() for d in self.diagnostics]
        if self.timing is not None:
            row["timing"] = self.timing.to_dict()
        if self.timing_skipped is not None:
            row["timing_skipped"] = self.timing_skipped
        return row

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evaluation:
        check, clauses = data.get("instrument_check"), data.get("clauses")
        contract, diagnostics = data.get("client_contract"), data.get("diagnostics")
        timing = data.get("timing")
        return cls(
            frozen=FrozenEvaluation.from_dict(data),
            candidate=CandidateRecord.from_dict(data["candidate"]),
            status=cast(EvaluationStatus, data["status"]),
            status_reason=data.get("status_reason"),
            instrument_check=None if check is None else InstrumentCheck.from_dict(check),
            clauses=None
            if clauses is None
            else {str(c): ClauseCounts.from_dict(v) for c, v in clauses.items()},
            client_contract=None if contract is None else ClientContract.from_dict(contract),
            diagnostics=None
            if diagnostics is None
            else tuple(DiagnosticRow.from_dict(d) for d in diagnostics),
            timing=None if timing is None else Timing.from_dict(timing),
            timing_skipped=data.get("timing_skipped"),
            extra={k: v for k, v in data.items() if k not in _known_keys()},
        )


def _known_keys() -> frozenset[str]:
    """The record keys this model reads (its fields, the frozen part's flattened into it);
    anything else a record holds is kept in ``Evaluation.extra``."""
    own = {f.name for f in fields(Evaluation)} - {"frozen", "extra"}
    return frozenset(own | {f.name for f in fields(FrozenEvaluation)})
