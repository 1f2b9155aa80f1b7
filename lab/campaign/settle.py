"""A campaign's numbers: the command line over the task file over ``lab evaluate``'s
defaults, checked before anything runs (one sentence and exit status 2 when out of range).

    settings = settle(request, task)
    settings.repetitions, settings.budget_s, settings.required, settings.evaluation.size
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.campaign.task import CampaignRequest, Task
from lab.errors import UsageError
from lab.evaluate.request import DEFAULT_TIMEOUT_S, EvaluationRequest
from lab.model.egress import parse_network
from lab.model.timing import DECIDING_METRICS
from lab.run.options import check_count, check_run_options
from lab.workloads.backup.fixture import DEFAULT_SIZE

#: lab evaluate's defaults, where neither the command line nor the task file says
EVALUATION_DEFAULTS: dict[str, Any] = {
    "repetitions": 3,
    "timing_runs": 12,
    "timing_max_runs": None,  # CAP_FACTOR × timing_runs (lab.evaluate.request)
    "collector": "all",
    "packets": "best-effort",
    "size": DEFAULT_SIZE,
    "timeout_s": DEFAULT_TIMEOUT_S,
}


@dataclass(frozen=True)
class Settings:
    """The campaign's numbers, the command line over the task file over the defaults."""

    repetitions: int
    budget_s: float
    required: int
    evaluation: EvaluationRequest


def settle(request: CampaignRequest, task: Task) -> Settings:
    repetitions = request.repetitions or task.repetitions
    check_count(repetitions, "--repetitions")
    required = repetitions if request.require is None else request.require
    if not 1 <= required <= repetitions:
        raise UsageError(
            f"--require {required} must be between 1 and --repetitions ({repetitions})."
        )
    budget = request.budget_s if request.budget_s is not None else task.budget_s
    if not 0 < budget <= 86_400:
        raise UsageError(f"--budget {budget:g} must be more than 0 and at most 86400 seconds.")
    for name in request.agent_env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name.startswith("LAB_"):
            raise UsageError(
                f"--agent-env {name!r} must name an environment variable not starting with "
                "LAB_ (the lab's own, its signing key included, never reach the agent)."
            )
        if name not in os.environ:
            raise UsageError(f"--agent-env {name}: the variable is not set in this environment.")
    parse_network(request.agent_network)  # host, none or model=HOST:PORT[,...]
    chosen = {**EVALUATION_DEFAULTS, **task.evaluation}
    for key, value in (
        ("repetitions", request.eval_repetitions),
        ("timing_runs", request.timing_runs),
        ("timing_max_runs", request.timing_max_runs),
        ("collector", request.collector),
        ("packets", request.packets),
        ("size", request.size),
        ("timeout_s", request.timeout_s),
    ):
        if value is not None:
            chosen[key] = value
    cap = chosen["timing_max_runs"]
    evaluation = EvaluationRequest(
        kind="patch",
        path=Path("native.patch"),  # each repetition's own, once the agent is done
        repetitions=int(chosen["repetitions"]),
        timing_runs=int(chosen["timing_runs"]),
        timing_max_runs=None if cap is None else int(cap),
        # the speed goal's ratio decides when the timing rounds stop, beside the first
        # backup's wall
        timing_metrics=tuple(
            dict.fromkeys(DECIDING_METRICS + (() if task.speed is None else (task.speed.metric,)))
        ),
        collector=str(chosen["collector"]),
        packets=str(chosen["packets"]),
        size=int(chosen["size"]),
        timeout_s=float(chosen["timeout_s"]),
        out=request.out,
        local=True,
    )
    check_run_options(
        repetitions=evaluation.repetitions,
        size=evaluation.size,
        timeout_s=evaluation.timeout_s,
        out=request.out,
        client=None,
    )
    evaluation.check_timing()
    return Settings(repetitions, budget, required, evaluation)


def evaluation_options(ev: EvaluationRequest) -> dict[str, Any]:
    return {
        "repetitions": ev.repetitions,
        "timing_runs": ev.timing_runs,
        "timing_max_runs": ev.timing_cap,
        "collector": ev.collector,
        "packets": ev.packets,
        "size": ev.size,
        "timeout_s": ev.timeout_s,
    }
