"""A campaign's task file (``campaigns/*.yaml``, validated against
``lab/schemas/campaign-task.schema.json``) and what ``lab campaign`` was asked to do.

    task = load_task(Path("campaigns/speedup.yaml"))     # CampaignError naming file and key
    task.text, task.budget_s, task.baseline_must, task.clauses, task.speed
    request = CampaignRequest(task_path=Path("campaigns/speedup.yaml"), agent_cmd="sh a.sh")

The task file is read as untrusted input, like a scenario file: bounded, regular, strict
YAML (``lab.workloads.backup.scenario_yaml``), then the schema.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lab.errors import CampaignError, ScenarioError
from lab.run.shard import ShardSpec
from lab.schemas import validate_campaign_task
from lab.workloads.backup.scenario_yaml import parse_strict, read_bounded

AgentNetwork = Literal["host", "none"]
AGENT_NETWORKS: tuple[AgentNetwork, ...] = ("host", "none")


@dataclass(frozen=True, kw_only=True)
class SpeedGoal:
    """The timing ratio of an untraced metric (the median of the rounds' candidate ÷
    baseline; for ``first_backup_wall_above_floor``: of the medians' shares above the
    instrument floor) must be at most ``max_ratio``, its whole 95 % interval included (timed
    at ``size`` bytes when given, else the evaluation's size)."""

    metric: str
    max_ratio: float
    size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "max_ratio": self.max_ratio, "size": self.size}

    def describe(self) -> str:
        at = f" at {self.size:,} bytes" if self.size else ""
        of = (
            "the medians' shares above the floor"
            if self.metric.endswith("_above_floor")
            else "the median of the rounds' ratios"
        )
        return (
            f"untraced {self.metric}{at} ≤ {self.max_ratio:g}× the baseline's ({of}, the "
            "whole 95 % interval)"
        )


@dataclass(frozen=True, kw_only=True)
class Task:
    name: str
    path: Path
    #: the file's bytes, digested (the provenance names the task by it)
    sha256: str
    raw: str
    text: str
    description: str
    budget_s: float
    repetitions: int
    baseline_must: Literal["pass", "fail"]
    clauses: tuple[str, ...]
    speed: SpeedGoal | None
    #: ``evaluation`` options of the file (repetitions, timing_runs, collector, ...)
    evaluation: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.path.name,
            "sha256": self.sha256,
            "budget_s": self.budget_s,
            "repetitions": self.repetitions,
            "baseline_must": self.baseline_must,
            "clauses": list(self.clauses),
            "speed": None if self.speed is None else self.speed.to_dict(),
            "evaluation": dict(self.evaluation),
        }


def load_task(path: Path) -> Task:
    try:
        raw = read_bounded(path)
        data = parse_strict(raw, path)
    except ScenarioError as error:
        raise CampaignError(str(error)) from None
    validate_campaign_task(data, path)
    success = data["success"]
    speed = success.get("speed")
    return Task(
        name=data["name"],
        path=path,
        sha256=hashlib.sha256(raw.encode()).hexdigest(),
        raw=raw,
        text=data["task"],
        description=data.get("description", ""),
        budget_s=float(data["budget_s"]),
        repetitions=int(data["repetitions"]),
        baseline_must=data["baseline"]["must"],
        clauses=tuple(sorted(success["clauses"])),
        speed=None
        if speed is None
        else SpeedGoal(
            metric=speed["metric"], max_ratio=float(speed["max_ratio"]), size=speed.get("size")
        ),
        evaluation=dict(data.get("evaluation") or {}),
    )


@dataclass(frozen=True, kw_only=True)
class CampaignRequest:
    """One ``lab campaign``: the task, the agent, how often, and the judging options (None:
    the task file's ``evaluation`` value, else lab evaluate's default)."""

    task_path: Path
    agent_cmd: str
    repetitions: int | None = None
    budget_s: float | None = None
    require: int | None = None
    #: host, none, or model=HOST:PORT[,model=HOST:PORT...] (lab.model.egress)
    agent_network: str = "host"
    #: names of variables of the lab's environment handed to the agent (its model's key,
    #: say): recorded by name, never by value
    agent_env: tuple[str, ...] = ()
    eval_repetitions: int | None = None
    timing_runs: int | None = None
    timing_max_runs: int | None = None
    collector: str | None = None
    packets: str | None = None
    size: int | None = None
    timeout_s: float | None = None
    out: Path = Path("artifacts")
    #: run on this host rather than in the lab image
    local: bool = False
    #: ``--json``: in the lab image too, so that its document comes back
    json: bool = False
    #: conduct only this shard's repetitions (``--shard I/N``, :mod:`lab.campaign.shard`)
    shard: ShardSpec | None = None
    #: the run id; with ``shard``, the id every shard shares (derived when None)
    run_id: str | None = None
    #: end a repetition after this many judged snapshots in a row with no new passing
    #: clause (``--stop-on-plateau K``; outcome ``plateaued``)
    stop_on_plateau: int | None = None
    #: a fixture task's seeds judged again even when a kept calibration matches its key
    recalibrate: bool = False
    #: ``--escalate-cmd``: the second agent given each run the first did not meet, with the
    #: signed evidence package of that run (``lab.campaign.escalate``)
    escalate_cmd: str | None = None

    def argv(self, *, task: str, out: str) -> list[str]:
        """The ``python -m lab`` arguments asking for this same campaign in the lab image."""
        args = ["campaign", "--task", task, "--agent-cmd", self.agent_cmd, "--out", out]
        args += ["--agent-network", self.agent_network]
        for name in self.agent_env:
            args += ["--agent-env", name]
        for flag, value in (
            ("--repetitions", self.repetitions),
            ("--budget", self.budget_s),
            ("--require", self.require),
            ("--eval-repetitions", self.eval_repetitions),
            ("--timing-runs", self.timing_runs),
            ("--timing-max-runs", self.timing_max_runs),
            ("--collector", self.collector),
            ("--packets", self.packets),
            ("--size", self.size),
            ("--timeout", self.timeout_s),
            ("--shard", self.shard),
            ("--run-id", self.run_id),
            ("--stop-on-plateau", self.stop_on_plateau),
            ("--escalate-cmd", self.escalate_cmd),
        ):
            if value is not None:
                args += [flag, str(value)]
        if self.recalibrate:
            args.append("--recalibrate")
        return [*args, "--json"] if self.json else args
