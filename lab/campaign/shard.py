"""``lab campaign --shard I/N``: one machine's share of an agent campaign.

The work units are the campaign's repetitions (agent runs 1…N), split as ``lab run`` splits
its units (:mod:`lab.run.shard`: sorted, every N-th). Every shard shares the evaluation id
(the frozen judgement) and the run id that names the merged campaign: ``--run-id``, or a
digest of the evaluation id, the task, the agent command and the files it names (by
digest), its network and variables (by name), the budget, the repetitions, ``--require``
and the shard count.

    plan = plan_shard(request, task, settings, frozen)   # request.shard == ShardSpec(2, 3)
    plan.run_id        # "campaign-1f0c…-shard2of3": this shard's run directory
    plan.indices       # [2, 5]: the agent runs this machine conducts

Every shard checks the instrument and judges the unchanged client (the baseline) on its own
machine before its agent runs, as an unsharded campaign does: a machine whose collectors
miss the seeded defects, or where the baseline does not show what the task requires,
refuses to start and leaves no archive (the merge then names that shard missing). Each
repetition's untraced timing rounds run on the machine that judged it, after its agent and
build, with nothing else of the lab beside them (one shard per machine): a repetition's
ratio is candidate against baseline alternated on one machine, so ratios from different
machines are each well defined, as they are across the repetitions of one machine.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.campaign.agent import agent_argv
from lab.campaign.settle import Settings
from lab.campaign.task import CampaignRequest, Task
from lab.model.evaluation import FrozenEvaluation
from lab.model.records import ShardRecord
from lab.run import shard

#: a campaign's work unit (``shard.unit`` in results.json) and the one name its units carry
UNIT_KIND = "campaign"
UNIT_NAME = "agent"


@dataclass(frozen=True)
class CampaignShard:
    spec: shard.ShardSpec
    #: the run id every shard of this campaign shares (the merged campaign's)
    frozen_id: str
    #: the repetitions (agent runs, from 1) this shard conducts, in order
    indices: list[int]
    #: ``results.json`` → ``shard``
    record: ShardRecord

    @property
    def run_id(self) -> str:
        return shard.shard_run_id(self.frozen_id, self.spec)


def units(repetitions: int) -> list[shard.Unit]:
    """Every agent run of a campaign of ``repetitions``, as work units."""
    return shard.work_units([UNIT_NAME], repetitions)


def shared_run_id(request: CampaignRequest, judged: Mapping[str, Any]) -> str:
    """``judged``: what decides the judgement and the agent's runs (``evaluation_id``,
    ``task_sha256``, ``budget_s``, ``repetitions``, ``require``); the agent and the shard
    count are the request's."""
    spec = request.shard
    assert spec is not None
    if request.run_id:
        return shard.check_run_id(request.run_id)
    with tempfile.TemporaryDirectory(prefix="lab-agent-files-") as probe:
        _, files = agent_argv(request.agent_cmd, Path(probe), cwd=Path.cwd())
    return shard.frozen_run_id(
        {
            **judged,
            "agent_command": request.agent_cmd,
            "agent_files": files,
            "agent_network": request.agent_network,
            "agent_env": list(request.agent_env),
            "shards": spec.count,
        },
        prefix="campaign",
    )


def plan_repetitions(
    request: CampaignRequest,
    *,
    evaluation_id: str,
    task_sha256: str,
    budget_s: float,
    repetitions: int,
    required: int,
) -> CampaignShard:
    """Any campaign's shard (a backup task's or a fixture task's): its repetitions and the
    run id every shard shares, from what decides the judgement and the agent's runs."""
    spec = request.shard
    assert spec is not None
    judged = {
        "evaluation_id": evaluation_id,
        "task_sha256": task_sha256,
        "budget_s": budget_s,
        "repetitions": repetitions,
        "require": required,
    }
    frozen_id = shared_run_id(request, judged)
    mine = spec.select(units(repetitions))
    return CampaignShard(
        spec=spec,
        frozen_id=frozen_id,
        indices=[u.repetition for u in mine],
        record=shard.shard_record(spec, mine, frozen_id, UNIT_KIND),
    )


def plan_shard(
    request: CampaignRequest, task: Task, settings: Settings, frozen: FrozenEvaluation
) -> CampaignShard:
    """A backup campaign's shard."""
    return plan_repetitions(
        request,
        evaluation_id=frozen.evaluation_id,
        task_sha256=task.sha256,
        budget_s=settings.budget_s,
        repetitions=settings.repetitions,
        required=settings.required,
    )
