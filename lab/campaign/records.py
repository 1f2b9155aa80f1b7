"""Campaign records made from what the other stages return: the agent's record from its
sandbox outcome, the unchanged client as a candidate record (the baseline check), and the
provenance's further dependencies (the task, the agent's files, each repetition's baseline
commit and patch).

    agent = agent_record(outcome)            # lab.sandbox.Outcome -> AgentRecord
    deps = dependencies(task, record)        # [{"name", "uri", "digest"}, ...]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lab import resources
from lab.campaign.task import Task
from lab.campaign.workspace import Capture
from lab.host.digest import sha256_file
from lab.model.campaign import AgentRecord, CampaignRecord, PatchRecord
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


#: how much of the end of agent.stderr a crashed agent's record and the console quote
STDERR_TAIL_CHARS = 300


def stderr_tail(path: Path) -> str | None:
    """The last non-empty lines of ``path``, whitespace folded, at most
    :data:`STDERR_TAIL_CHARS` characters; None when there is nothing."""
    try:
        with path.open("rb") as stream:
            size = stream.seek(0, os.SEEK_END)
            stream.seek(max(0, size - 4 * STDERR_TAIL_CHARS))
            text = stream.read().decode("utf-8", "replace")
    except OSError:
        return None
    folded = " ".join(text.split())
    return folded[-STDERR_TAIL_CHARS:] or None


def agent_record(ran: SandboxOutcome, stderr: Path | None = None) -> AgentRecord:
    """``stderr``: agent.stderr, quoted (its end) when the agent exited non-zero."""
    # a sandbox failure quotes stderr in its own sentence already
    failed = ran.sandbox_error is None and not ran.timed_out and ran.exit_status != 0
    return AgentRecord(
        exit_status=ran.exit_status,
        timed_out=ran.timed_out,
        duration_s=round(ran.wall_s, 3),
        lingering_count=ran.lingering_count,
        contained=ran.contained,
        sandbox_error=ran.sandbox_error,
        stdout_bytes=0 if ran.stdout is None else ran.stdout.total_bytes,
        stderr_bytes=0 if ran.stderr is None else ran.stderr.total_bytes,
        stderr_tail=stderr_tail(stderr) if failed and stderr is not None else None,
        cgroup=None if ran.stats is None else ran.stats.to_dict(),
        lingering=tuple(p.to_dict() for p in ran.lingering),
    )


def patch_record(capture: Capture) -> PatchRecord:
    """What ``workspace.take`` captured of the agent's result."""
    return PatchRecord(
        sha256=capture.patch_sha256,
        bytes=capture.patch_bytes,
        files_changed=capture.files_changed,
        outside_native=capture.outside_native,
        native_empty=capture.native_empty,
        final_commit=capture.final_commit,
        bundle_sha256=capture.bundle_sha256,
        problem=capture.problem,
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
