"""The results model: what a run observed and how it was judged. No I/O lives here.

Collectors, the receiver and the verifier *produce* these records;
``lab.workloads.backup.contract`` *judges* them; presenters (``lab.reports``) *draw* them.
``RunResult.to_dict()`` is exactly what goes into ``results.json``
(``lab/schemas/results.schema.json``). One pass and its invocations (``Pass``, ``Invocation``
and the records they hold) are defined in ``lab.model.invocation``; every record is importable
from ``lab.model``.

    run = RunResult(run_id="20261129T160000Z-ab12cd", started_at=..., ...)
    run.scenarios.append(ScenarioResult(name="baseline", repetition=1, ...))
    json.dumps(run.to_dict(), sort_keys=True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lab.model.aggregate import ScenarioAggregate
from lab.model.invocation import Invocation, Pass
from lab.model.observed import Observed
from lab.model.read import mapping, required
from lab.model.records import ConcurrencyRecord, IncompleteRecord, ShardRecord, SigningRecord
from lab.model.verdicts import CLAUSES, Calibration, Finding, Verdict
from lab.registry import COLLECTOR_NAMES, PROCESS_COLLECTORS

if TYPE_CHECKING:  # imported by from_dict where a record holds one (a run has neither)
    from lab.model.campaign import CampaignRecord
    from lab.model.evaluation import Evaluation

SCHEMA_VERSION = 1

#: Observers whose findings can be expected in a scenario file. ``client`` is the client's
#: own claim (exit status, events); everything else is independent of the client.
OBSERVERS: tuple[str, ...] = ("client", "receiver", "decoy", "verifier", *COLLECTOR_NAMES)


@dataclass
class ObserverStatus:
    """Whether an observer could run on this machine, and why not."""

    available: bool
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"available": self.available, "reason": self.reason, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ObserverStatus:
        """One ``observers.<name>`` record."""
        return cls(
            available=bool(data["available"]),
            reason=data.get("reason"),
            detail=dict(data["detail"]),
        )


@dataclass(frozen=True)
class Overhead:
    """Traced ÷ untraced client time for one process collector in one scenario, summed over
    the invocations both passes ran; None where either side was not recorded. The traced
    side is the wrapped command: the tracer's start-up, attach, teardown and own CPU count."""

    collector: str
    wall_ratio: float | None
    cpu_ratio: float | None
    untraced_wall_s: float
    traced_wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "collector": self.collector,
            "wall_ratio": None if self.wall_ratio is None else round(self.wall_ratio, 4),
            "cpu_ratio": None if self.cpu_ratio is None else round(self.cpu_ratio, 4),
            "untraced_wall_s": round(self.untraced_wall_s, 6),
            "traced_wall_s": round(self.traced_wall_s, 6),
        }


@dataclass
class ScenarioResult:
    name: str
    repetition: int
    description: str
    scenario_file: str
    passes: list[Pass]
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    #: wall time of the whole scenario (all passes) as the lab saw it
    wall_s: float = 0.0

    @property
    def primary(self) -> Pass | None:
        """The pass whose receiver, verifier and client records head the report: the
        untraced pass when there was one, else the first."""
        for p in self.passes:
            if p.collector == "none":
                return p
        return self.passes[0] if self.passes else None

    @property
    def calibration(self) -> Calibration:
        return Calibration.of(self.findings, list(self.verdicts.values()))

    def invocations(self) -> list[Invocation]:
        """The brief's per-invocation view: the primary pass's records, with ``observed``
        merged from every pass (each observer's summary comes from the pass it ran in), and
        ``missing`` and ``artifacts`` likewise."""
        primary = self.primary
        if primary is None:
            return []
        rows: list[Invocation] = []
        for inv in primary.invocations:
            observed = Observed()
            missing: dict[str, str] = {}
            artifacts: dict[str, list[str]] = {}
            for p in self.passes:
                for other in p.invocations:
                    if other.index != inv.index:
                        continue
                    observed = observed.merged(other.observed)
                    for name, why in other.missing.items():
                        missing.setdefault(name, why)
                    for name, paths in other.artifacts.items():
                        artifacts.setdefault(name, []).extend(paths)
            for p in self.passes:
                if p.error and p.collector not in observed:
                    missing.setdefault(p.collector, p.error)
            for name in observed.names():
                missing.pop(name, None)
            rows.append(
                replace(
                    inv,
                    observed=observed,
                    missing={k: missing[k] for k in sorted(missing)},
                    artifacts={k: sorted(set(v)) for k, v in sorted(artifacts.items())},
                )
            )
        return rows

    def merged_invocations(self) -> list[dict[str, Any]]:
        """``invocations()`` as ``results.json`` records them."""
        return [inv.to_dict() for inv in self.invocations()]

    def overhead(self) -> list[Overhead]:
        """Per process collector: the traced pass's client wall and CPU time divided by the
        untraced (``none``) pass's, over the invocation indices both passes hold. A pass
        whose tracer failed measured nothing and is skipped."""
        untraced = next((p for p in self.passes if p.collector == "none"), None)
        if untraced is None:
            return []
        base = {inv.index: inv.claim for inv in untraced.invocations}
        result: list[Overhead] = []
        for p in self.passes:
            if p.collector not in PROCESS_COLLECTORS or p.error is not None:
                continue
            pairs = [(base[i.index], i.claim) for i in p.invocations if i.index in base]
            if not pairs:
                continue
            u_wall = sum(u.wall_s for u, _ in pairs)
            t_wall = sum(t.wall_s for _, t in pairs)
            cpu_ratio: float | None = None
            if all(u.cpu_s is not None and t.cpu_s is not None for u, t in pairs):
                u_cpu = sum(u.cpu_s or 0.0 for u, _ in pairs)
                t_cpu = sum(t.cpu_s or 0.0 for _, t in pairs)
                cpu_ratio = t_cpu / u_cpu if u_cpu > 0 else None
            wall_ratio = t_wall / u_wall if u_wall > 0 else None
            result.append(Overhead(p.collector, wall_ratio, cpu_ratio, u_wall, t_wall))
        return result

    def backup(self) -> dict[str, Any]:
        primary = self.primary
        if primary is None or not primary.invocations:
            return {"exists": False, "sha256": None, "matches_source": False}
        last = primary.invocations[-1].verifier
        return {
            "exists": last.backup_exists,
            "sha256": last.backup_sha256,
            "matches_source": last.matches_source,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repetition": self.repetition,
            "description": self.description,
            "scenario_file": self.scenario_file,
            "error": self.error,
            "wall_s": round(self.wall_s, 6),
            "verdicts": {c: self.verdicts[c].to_dict() for c in CLAUSES if c in self.verdicts},
            "backup": self.backup(),
            "invocations": self.merged_invocations(),
            "findings": [f.to_dict() for f in self.findings],
            "calibration": self.calibration.to_dict(),
            "tracing_overhead": [o.to_dict() for o in self.overhead()],
            "passes": [p.to_dict() for p in self.passes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScenarioResult:
        """One ``scenarios[]`` record (what ``to_dict`` derives is derived again)."""
        return cls(
            name=str(required(data, "name", "scenario")),
            repetition=int(required(data, "repetition", "scenario")),
            description=str(data.get("description", "")),
            scenario_file=str(data.get("scenario_file", "")),
            passes=[
                Pass.from_dict(mapping(p, "pass")) for p in required(data, "passes", "scenario")
            ],
            verdicts={
                str(c): Verdict.from_dict(mapping(v, f"verdict {c}"))
                for c, v in (data.get("verdicts") or {}).items()
            },
            findings=[Finding.from_dict(mapping(f, "finding")) for f in data.get("findings") or []],
            error=data.get("error"),
            wall_s=float(data.get("wall_s", 0.0)),
        )


@dataclass
class RunResult:
    run_id: str
    started_at: str
    finished_at: str
    options: dict[str, Any]
    observers: dict[str, ObserverStatus]
    environment: dict[str, Any]
    scenarios: list[ScenarioResult] = field(default_factory=list)
    #: clause-level and timing aggregates over repetitions (``lab.judge.aggregate``)
    aggregate: list[ScenarioAggregate] = field(default_factory=list)
    #: set by candidate evaluation (``lab.evaluate.judge``)
    evaluation: Evaluation | None = None
    #: set by an agent campaign (``lab.campaign.conduct``)
    campaign: CampaignRecord | None = None
    #: signing identity, filled when the archive is written
    signing: SigningRecord | dict[str, Any] = field(default_factory=dict)
    #: a shard's run (``--shard I/N``): index, count, units, the frozen run id (lab.run.shard)
    shard: ShardRecord | None = None
    #: a merged run (``lab merge``): one record per shard archive it was made of
    shards: list[dict[str, Any]] = field(default_factory=list)
    #: an interrupted run (lab.run.interrupt): ``{"reason": ...}``; never signed or packed
    incomplete: IncompleteRecord | None = None
    #: ``--jobs N``: passes asked and run at once, which ran beside another (lab.run.schedule)
    concurrency: ConcurrencyRecord | None = None

    @property
    def calibration(self) -> Calibration:
        total = Calibration()
        for s in self.scenarios:
            total = total + s.calibration
        return total

    @property
    def executed(self) -> bool:
        return all(s.error is None for s in self.scenarios)

    @property
    def calibrated(self) -> bool:
        """Every scenario executed and no observation disagrees with its expectation."""
        return self.incomplete is None and self.executed and self.calibration.not_met == 0

    def to_dict(self) -> dict[str, Any]:
        sharding: dict[str, Any] = {"shard": self.shard} if self.shard is not None else {}
        if self.shards:
            sharding["shards"] = self.shards
        if self.campaign is not None:
            sharding["campaign"] = self.campaign.to_dict()
        if self.incomplete is not None:
            sharding["incomplete"] = self.incomplete
        if self.concurrency is not None:
            sharding["concurrency"] = self.concurrency
        return {
            **sharding,
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "options": self.options,
            "environment": self.environment,
            "calibration": self.calibration.to_dict(),
            "observers": {k: v.to_dict() for k, v in sorted(self.observers.items())},
            "scenarios": [s.to_dict() for s in self.scenarios],
            "aggregate": [row.to_dict() for row in self.aggregate],
            "evaluation": None if self.evaluation is None else self.evaluation.to_dict(),
            "signing": self.signing,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        """A whole ``results.json``; raises ``ValueError`` (or ``KeyError``/``TypeError``,
        which callers treat alike) when it is not one the lab wrote."""
        data = mapping(data, "results.json")
        evaluation, campaign = _records(data)
        return cls(
            run_id=str(required(data, "run_id", "results")),
            started_at=str(required(data, "started_at", "results")),
            finished_at=str(required(data, "finished_at", "results")),
            options=dict(data.get("options") or {}),
            observers={
                str(name): ObserverStatus.from_dict(s)
                for name, s in mapping(data.get("observers") or {}, "observers").items()
            },
            environment=dict(data.get("environment") or {}),
            scenarios=[
                ScenarioResult.from_dict(mapping(s, "scenario"))
                for s in data.get("scenarios") or []
            ],
            aggregate=[
                ScenarioAggregate.from_dict(mapping(row, "aggregate"))
                for row in data.get("aggregate") or []
            ],
            evaluation=evaluation,
            campaign=campaign,
            signing=dict(data.get("signing") or {}),
            shard=data.get("shard"),
            shards=list(data.get("shards") or []),
            concurrency=data.get("concurrency"),
        )


def _records(data: Mapping[str, Any]) -> tuple[Evaluation | None, CampaignRecord | None]:
    """A ``results.json``'s evaluation and campaign records; their models are imported here
    only when it holds them (a run's has neither, and its start need not import them)."""
    evaluation, campaign = data.get("evaluation"), data.get("campaign")
    if evaluation is not None:
        from lab.model.evaluation import Evaluation

        evaluation = Evaluation.from_dict(evaluation)
    if campaign is not None:
        from lab.model.campaign import CampaignRecord

        campaign = CampaignRecord.from_dict(mapping(campaign, "campaign"))
    return evaluation, campaign
