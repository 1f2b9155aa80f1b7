"""The campaign record (``campaign`` in ``results.json``) as typed values, with every figure
the reports draw: per-repetition rows, k of N, per-clause k/N, durations, the evidence map.

    record = CampaignRecord(task=..., agent=..., repetitions=[RepetitionRecord(...), ...])
    record.met, record.clause_counts()["C1"], record.duration_spread(), record.to_dict()

No I/O lives here, and nothing from the lab but the evaluation record it embeds (one per
judged repetition): ``lab.model`` imports it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from lab import intervals
from lab.model.campaign_agent import AgentRecord as AgentRecord
from lab.model.campaign_agent import PatchRecord as PatchRecord
from lab.model.egress import EgressRecord, Verdict
from lab.model.evaluation import Evaluation
from lab.model.processes import ProcessRecord
from lab.model.read import mapping, required
from lab.model.task import TaskEvaluation
from lab.model.trajectory import TrajectoryRecord

T = TypeVar("T")

Outcome = Literal[
    "met", "failed", "build-failed", "no-change", "timed-out", "agent-crashed", "plateaued"
]
OUTCOMES: tuple[Outcome, ...] = (
    "met",
    "failed",
    "build-failed",
    "no-change",
    "timed-out",
    "agent-crashed",
    "plateaued",
)
CLAUSES = ("C1", "C2", "C3", "C4", "C5", "C6")

#: the nine items an agent run's evidence must hold (the second seed article), and where
#: each lives in the archive (``rN`` is a repetition's directory)
EVIDENCE: tuple[tuple[str, str], ...] = (
    (
        "the initial repository state",
        "repetitions/rN/workspace.json (every file given, its SHA-256, the baseline commit); "
        "the baseline commit is the first commit of repetitions/rN/final.bundle",
    ),
    (
        "the exact task and configuration",
        "campaign/task.yaml (the task file as given), campaign/campaign.json (agent command, "
        "its files, budget, network, repetitions, evaluation id) and evaluation.json, both "
        "written before the agent first runs",
    ),
    (
        "a clean workspace per repetition",
        "repetitions/rN/workspace.json: each repetition's fresh workspace, the same baseline "
        "commit id every time",
    ),
    (
        "the agent's stdout, stderr, exit code and duration",
        "repetitions/rN/agent.stdout, agent.stderr; repetitions/rN/repetition.json (agent)",
    ),
    (
        "the patch, including failed runs",
        "repetitions/rN/patch.diff (git diff --binary against the baseline, every file), "
        "native.patch (what was built), for every outcome",
    ),
    (
        "deterministic verification commands and their outputs",
        "commands.jsonl; repetitions/rN/candidate/build.log; repetitions/rN/judged/ (every "
        "condition's evidence and result.json); the frozen evaluation id",
    ),
    (
        "a final snapshot that can be restored independently",
        "repetitions/rN/final.bundle (git clone final.bundle: baseline and final commits)",
    ),
    (
        "what the contract does not prove",
        "report.md and report.pdf, section 'What this campaign does not prove'",
    ),
    (
        "repetition before any reliability claim",
        "results.json campaign.met / campaign.repetitions and per-clause k/N; report.md "
        "'Agent campaign'",
    ),
)

#: the limits of what a campaign shows, as the report states them
NOT_PROVEN: tuple[str, ...] = (
    "The contract judges a backup client's behaviour under the lab's conditions "
    "(scenarios/candidate/); it does not prove the patch is correct under other sources, "
    "receivers, faults or machines.",
    "The agent's own explanation, commits and exit status are kept but never judged: the "
    "outcome is the verified result of the built candidate.",
    "Timing ratios are medians of a few untraced rounds on this machine, sandbox set-up "
    "included; they are not a benchmark elsewhere.",
    "Changes outside native/ are recorded in the patch but never built or judged.",
    "k of N says how often this agent met this task with this budget here; N repetitions "
    "bound, but do not measure exactly, how often it would on the next try.",
)


#: pass@k and pass^k are given for k = 1 … min(N, this)
PASS_K_MAX = 10
PASS_HAT_K_ESTIMATOR = (
    "C(c,k)/C(n,k): the chance that k repetitions drawn without replacement from the n run "
    "all met the task (an unbiased estimate of p^k); pass@k is 1 - C(n-c,k)/C(n,k)"
)


@dataclass(frozen=True, kw_only=True)
class RepetitionRecord:
    index: int
    outcome: Outcome
    #: one sentence: why this outcome
    reason: str
    #: clauses of the task's success criteria that did not pass (with why)
    failed_clauses: dict[str, str]
    baseline_commit: str
    agent: AgentRecord
    patch: PatchRecord | None
    #: the judgement (lab evaluate's record, or a fixture task's); None when nothing was
    #: judged
    evaluation: Evaluation | TaskEvaluation | None = None
    #: the timing ratio of the task's speed metric (or first backup wall): the median of the
    #: rounds' candidate ÷ baseline (``lab.evaluate.interval``)
    timing_ratio: float | None = None
    #: the ratio's 95 % interval [low, high] (``lab.evaluate.interval``); the speed goal is
    #: met only when all of it is under the goal
    timing_ratio_interval: list[float] | None = None
    speed_met: bool | None = None
    #: what the agent's network showed (``--agent-network model=HOST:PORT``); None when
    #: it was not witnessed (host or none)
    egress: EgressRecord | None = None
    #: every exec of the agent's cgroup, what it left, its verification runs
    processes: ProcessRecord | None = None
    #: the workspace over time, each distinct snapshot judged
    trajectory: TrajectoryRecord | None = None
    #: the second agent's run (``--escalate-cmd``) from the evidence package of this one,
    #: judged by the same gates; None when this one was not escalated
    escalation: RepetitionRecord | None = None

    @property
    def agent_verdicts(self) -> dict[str, Verdict]:
        """The agent's own clauses: A1 egress (not-observed unless its network was witnessed)."""
        return {"A1": "not-observed" if self.egress is None else self.egress.verdict}

    @property
    def duration_s(self) -> float:
        return self.agent.duration_s

    def row(self) -> dict[str, Any]:
        """The ``--json`` row (issue 13's public shape)."""
        return {
            "index": self.index,
            "outcome": self.outcome,
            "failed_clauses": sorted(self.failed_clauses),
            "duration_s": self.duration_s,
            "patch_sha256": None if self.patch is None else self.patch.sha256,
            "timing_ratio": self.timing_ratio,
            "timing_ratio_interval": self.timing_ratio_interval,
            "agent_verdicts": self.agent_verdicts,
            "model_requests": None if self.egress is None else self.egress.model_requests,
            "tokens": None if self.egress is None else self.egress.tokens(),
            "escalation": None
            if self.escalation is None
            else {
                "outcome": self.escalation.outcome,
                "failed_clauses": sorted(self.escalation.failed_clauses),
            },
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.row(),
            "directory": f"repetitions/r{self.index}",
            "reason": self.reason,
            "failed_clauses_why": dict(self.failed_clauses),
            "baseline_commit": self.baseline_commit,
            "agent": self.agent.to_dict(),
            "patch": None if self.patch is None else self.patch.to_dict(),
            "speed_met": self.speed_met,
            "evaluation": None if self.evaluation is None else self.evaluation.to_dict(),
            "egress": None if self.egress is None else self.egress.to_dict(),
            "processes": None if self.processes is None else self.processes.to_dict(),
            "trajectory": None if self.trajectory is None else self.trajectory.to_dict(),
            "escalated": None if self.escalation is None else self.escalation.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RepetitionRecord:
        """One agent run of a campaign (``campaign.repetitions[]``)."""
        agent, patch, evaluation = data["agent"], data.get("patch"), data.get("evaluation")
        return cls(
            index=int(data["index"]),
            outcome=cast(Outcome, data["outcome"]),
            reason=str(data["reason"]),
            failed_clauses={
                str(c): str(w) for c, w in (data.get("failed_clauses_why") or {}).items()
            },
            baseline_commit=str(data["baseline_commit"]),
            agent=AgentRecord(
                exit_status=agent.get("exit_status"),
                timed_out=bool(agent["timed_out"]),
                duration_s=float(agent["duration_s"]),
                lingering_count=int(agent["lingering_count"]),
                contained=bool(agent["contained"]),
                sandbox_error=agent.get("sandbox_error"),
                stdout_bytes=int(agent["stdout_bytes"]),
                stderr_bytes=int(agent["stderr_bytes"]),
                stderr_tail=agent.get("stderr_tail"),
                cgroup=agent.get("cgroup"),
                lingering=tuple(agent.get("lingering") or ()),
            ),
            patch=None
            if patch is None
            else PatchRecord(
                sha256=str(patch["sha256"]),
                bytes=int(patch["bytes"]),
                files_changed=tuple(patch["files_changed"]),
                outside_native=tuple(patch["outside_native"]),
                native_empty=bool(patch["native_empty"]),
                final_commit=patch.get("final_commit"),
                bundle_sha256=patch.get("bundle_sha256"),
                problem=patch.get("problem"),
            ),
            evaluation=_judgement(evaluation),
            timing_ratio=data.get("timing_ratio"),
            timing_ratio_interval=data.get("timing_ratio_interval"),
            speed_met=data.get("speed_met"),
            egress=_read(EgressRecord.from_dict, data.get("egress")),
            processes=_read(ProcessRecord.from_dict, data.get("processes")),
            trajectory=_read(TrajectoryRecord.from_dict, data.get("trajectory")),
            escalation=_read(RepetitionRecord.from_dict, data.get("escalated")),
        )


def _judgement(data: Any) -> Evaluation | TaskEvaluation | None:
    """A repetition's judgement: a fixture task's (``kind: task``) or ``lab evaluate``'s."""
    if data is None:
        return None
    if mapping(data, "evaluation").get("kind") == "task":
        return TaskEvaluation.from_dict(dict(data))
    return Evaluation.from_dict(data)


def _read(reader: Callable[[Mapping[str, Any]], T], data: Any) -> T | None:
    """An optional record (absent in documents written before it existed)."""
    return None if data is None else reader(mapping(data, "repetition"))


@dataclass(frozen=True, kw_only=True)
class CampaignRecord:
    #: the task file's record (lab.campaign.task.Task.to_dict)
    task: dict[str, Any]
    agent_command: str
    #: files the command named, copied into the sandbox: name -> SHA-256
    agent_files: dict[str, str]
    agent_network: str
    #: names of the variables handed to the agent (never their values)
    agent_env: tuple[str, ...] = ()
    budget_s: float
    requested: int
    required: int
    evaluation_id: str
    #: the judging options (lab evaluate's)
    evaluation_options: dict[str, Any]
    instrument_check: dict[str, Any]
    #: what the unchanged client showed (status) against what the task requires (must)
    baseline: dict[str, Any]
    repetitions: list[RepetitionRecord] = field(default_factory=list)
    #: ``--escalate-cmd``: the second agent given the runs the first did not meet
    escalate_command: str | None = None

    @property
    def met(self) -> int:
        return sum(1 for r in self.repetitions if r.outcome == "met")

    @property
    def total(self) -> int:
        return len(self.repetitions)

    @property
    def succeeded(self) -> bool:
        return self.met >= self.required

    def outcome_counts(self) -> dict[str, int]:
        return {o: sum(1 for r in self.repetitions if r.outcome == o) for o in OUTCOMES}

    def clause_counts(self) -> dict[str, int]:
        """Clause -> repetitions whose judged candidate passed it (a repetition that was
        not judged, a build failure or a time-out, passed no clause)."""
        return {
            c: sum(
                1
                for r in self.repetitions
                if r.evaluation is not None
                and r.evaluation.clauses is not None
                and c not in r.failed_clauses
                and r.outcome not in ("build-failed", "timed-out", "no-change")
            )
            for c in self.task.get("clauses", CLAUSES)
        }

    def interval(self, k: int | None = None) -> list[float] | None:
        """The 95 % interval (:data:`lab.intervals.METHOD`) for ``k`` (default: met) of the
        repetitions run; None before any ran."""
        if not self.total:
            return None
        return list(intervals.interval(self.met if k is None else k, self.total))

    def upper_bound(self) -> float | None:
        """The one-sided 95 % upper bound on the true rate ("0 of 3 is compatible with a
        true rate up to 63 %")."""
        return intervals.upper_bound(self.met, self.total) if self.total else None

    def lower_bound(self) -> float | None:
        """The one-sided 95 % lower bound ("3 of 3: at least 37 %")."""
        return intervals.lower_bound(self.met, self.total) if self.total else None

    def pass_estimates(self) -> dict[str, dict[str, float]]:
        """pass@k and pass^k for k = 1 … N (at most :data:`PASS_K_MAX`), keyed by k."""
        n, c = self.total, self.met
        ks = range(1, min(n, PASS_K_MAX) + 1)
        return {
            "pass_at_k": {str(k): intervals.pass_at_k(n=n, c=c, k=k) for k in ks},
            "pass_hat_k": {str(k): intervals.pass_hat_k(n=n, c=c, k=k) for k in ks},
        }

    def statistics(self) -> dict[str, Any]:
        """The figures beside k of N, as ``--json`` and results.json carry them."""
        return {
            "interval": self.interval(),
            "interval_method": intervals.METHOD,
            "interval_confidence": intervals.CONFIDENCE,
            "upper_bound_one_sided": self.upper_bound(),
            "lower_bound_one_sided": self.lower_bound(),
            **self.pass_estimates(),
            "pass_hat_k_estimator": PASS_HAT_K_ESTIMATOR,
        }

    def tiers(self) -> dict[str, Any]:
        """Verified successes per tier (1: the agent; 2: ``--escalate-cmd`` on the runs it
        did not meet), each tier's agent time and tokens, and per verified success over
        both (tokens None when any run's were unread)."""
        runs = {
            "1": list(self.repetitions),
            "2": [r.escalation for r in self.repetitions if r.escalation is not None],
        }
        tiers: dict[str, Any] = {}
        for tier, rows in runs.items():
            tokens = [r.egress.tokens() if r.egress is not None else None for r in rows]
            met_here = sum(1 for r in rows if r.outcome == "met")
            tiers[tier] = {
                "runs": len(rows),
                "met": met_here,
                "interval": list(intervals.interval(met_here, len(rows))) if rows else None,
                "agent_s": round(sum(r.duration_s for r in rows), 3),
                "tokens": None
                if None in tokens
                else sum(t["prompt"] + t["completion"] for t in tokens if t is not None),
            }
        met = tiers["1"]["met"] + tiers["2"]["met"]
        spent = [tiers[t]["tokens"] for t in tiers]
        return {
            "tiers": tiers,
            "verified_successes": met,
            "agent_s_per_success": round((tiers["1"]["agent_s"] + tiers["2"]["agent_s"]) / met, 3)
            if met
            else None,
            "tokens_per_success": None if not met or None in spent else round(sum(spent) / met),
        }

    def duration_spread(self) -> dict[str, float] | None:
        values = [r.duration_s for r in self.repetitions]
        if not values:
            return None
        return {
            "median": round(statistics.median(values), 3),
            "min": round(min(values), 3),
            "max": round(max(values), 3),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": dict(self.task),
            "agent": {
                "command": self.agent_command,
                "files": dict(self.agent_files),
                "network": self.agent_network,
                "environment": list(self.agent_env),
                "budget_s": self.budget_s,
                "escalate_command": self.escalate_command,
            },
            "requested": self.requested,
            "required": self.required,
            "met": self.met,
            "succeeded": self.succeeded,
            "evaluation_id": self.evaluation_id,
            "evaluation_options": dict(self.evaluation_options),
            "instrument_check": dict(self.instrument_check),
            "baseline": dict(self.baseline),
            "outcomes": self.outcome_counts(),
            "clauses": {
                c: {"met": k, "total": self.total, "interval": self.interval(k)}
                for c, k in self.clause_counts().items()
            },
            **self.statistics(),
            "duration_s": self.duration_spread(),
            "escalation": self.tiers(),
            "repetitions": [r.to_dict() for r in self.repetitions],
            "evidence": [{"item": item, "where": where} for item, where in EVIDENCE],
            "not_proven": list(NOT_PROVEN),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CampaignRecord:
        """``results.json`` → ``campaign``; what ``to_dict`` derives (met, outcomes,
        clauses, durations, the evidence map) is derived again."""
        agent = mapping(required(data, "agent", "campaign"), "campaign.agent")
        return cls(
            task=dict(data["task"]),
            agent_command=str(agent["command"]),
            agent_files={str(k): str(v) for k, v in (agent.get("files") or {}).items()},
            agent_network=str(agent["network"]),
            agent_env=tuple(agent.get("environment") or ()),
            budget_s=float(agent["budget_s"]),
            escalate_command=agent.get("escalate_command"),
            requested=int(data["requested"]),
            required=int(data["required"]),
            evaluation_id=str(data["evaluation_id"]),
            evaluation_options=dict(data["evaluation_options"]),
            instrument_check=dict(data["instrument_check"]),
            baseline=dict(data["baseline"]),
            repetitions=[
                RepetitionRecord.from_dict(mapping(r, "repetition")) for r in data["repetitions"]
            ],
        )


def campaign_statistics(record: CampaignRecord | None) -> dict[str, Any]:
    """The statistics of ``lab campaign --json`` (null figures when no campaign ran here)."""
    if record is None:
        return {"interval": None, "interval_method": intervals.METHOD}
    return record.statistics()
