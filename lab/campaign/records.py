"""Campaign records made from what the other stages return: the agent's record from its
sandbox outcome, the unchanged client as a candidate record (the baseline check), and the
provenance's further dependencies (the task, the agent's files, each repetition's baseline
commit and patch).

    agent = agent_record(outcome)            # lab.sandbox.Outcome -> AgentRecord
    deps = dependencies(task, record)        # [{"name", "uri", "digest"}, ...]
"""

from __future__ import annotations

from typing import Any

from lab import resources
from lab.campaign.task import Task
from lab.host.digest import sha256_file
from lab.model.campaign import AgentRecord, CampaignRecord
from lab.model.evaluation import BuildRecord, CandidateRecord
from lab.sandbox import Outcome as SandboxOutcome


def native_record() -> CandidateRecord:
    client = resources.native_client()
    digest = sha256_file(client)
    return CandidateRecord(
        kind="binary",
        input_name="native/backup-client",
        input_sha256=digest,
        binary_sha256=digest,
        build=BuildRecord(status="prebuilt"),
    )


def agent_record(ran: SandboxOutcome) -> AgentRecord:
    return AgentRecord(
        exit_status=ran.exit_status,
        timed_out=ran.timed_out,
        duration_s=round(ran.wall_s, 3),
        lingering_count=ran.lingering_count,
        contained=ran.contained,
        sandbox_error=ran.sandbox_error,
        stdout_bytes=0 if ran.stdout is None else ran.stdout.total_bytes,
        stderr_bytes=0 if ran.stderr is None else ran.stderr.total_bytes,
    )


def dependencies(task: Task, record: CampaignRecord) -> list[dict[str, Any]]:
    """What the provenance names beside the lab's own source: the task, the agent's files,
    each repetition's baseline commit and patch."""
    deps: list[dict[str, Any]] = [
        {
            "name": f"task:{task.path.name}",
            "uri": "campaign/task.yaml",
            "digest": {"sha256": task.sha256},
        },
    ]
    for name, digest in record.agent_files.items():
        deps.append({"name": f"agent:{name}", "uri": f"agent/{name}", "digest": {"sha256": digest}})
    for rep in record.repetitions:
        deps.append(
            {
                "name": f"r{rep.index}:baseline",
                "uri": f"repetitions/r{rep.index}",
                "digest": {"gitCommit": rep.baseline_commit},
            }
        )
        if rep.patch is not None:
            deps.append(
                {
                    "name": f"r{rep.index}:patch",
                    "uri": f"repetitions/r{rep.index}/patch.diff",
                    "digest": {"sha256": rep.patch.sha256},
                }
            )
    return deps
