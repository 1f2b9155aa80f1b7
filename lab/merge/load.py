"""``results.json`` read back into the results model: the inverse of ``RunResult.to_dict()``.

``lab merge`` judges nothing again: it reads each verified shard's records into the same
dataclasses the runner built, so the judges' aggregate code (``lab.judge.aggregate``) and
the presenters (``lab.reports``) work on them unchanged.

    run = load_run(json.loads((shard_dir / "results.json").read_text()))
    run.to_dict()["scenarios"] == document["scenarios"]     # the same records

What ``to_dict`` derives (``backup``, the merged ``invocations`` view, ``calibration``,
``tracing_overhead``, ``contract_violations``, ``verified``) is derived again, never read.
The client's event lines themselves are not in ``results.json`` (only their count, and the
lines in the timeline and ``client.stdout``), so a loaded claim holds ``event_count`` and no
``events``. A malformed document raises ``ValueError`` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from lab.model import (
    ClientClaim,
    DecoySummary,
    Finding,
    Invocation,
    Lingering,
    Observed,
    ObserverStatus,
    Outcome,
    Pass,
    ReceiverSummary,
    RunResult,
    SandboxRecord,
    ScenarioResult,
    SharedSession,
    Verdict,
    VerifierCheck,
)
from lab.model.aggregate import ScenarioAggregate
from lab.model.campaign import (
    AgentRecord,
    CampaignRecord,
    PatchRecord,
    RepetitionRecord,
)
from lab.model.campaign import (
    Outcome as CampaignOutcome,
)
from lab.model.evaluation import Evaluation
from lab.model.sandbox import CgroupStats


def _map(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} is not an object")
    return data


def _get(data: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in data:
        raise ValueError(f"{what}.{key} is missing")
    return data[key]


def load_claim(data: Mapping[str, Any]) -> ClientClaim:
    return ClientClaim(
        exit_status=data["exit_status"],
        claimed_success=bool(data["claimed_success"]),
        completion=data.get("completion"),
        events=[],
        unparsed_lines=int(data.get("unparsed_lines", 0)),
        timed_out=bool(data.get("timed_out", False)),
        killed_by_signal=data.get("killed_by_signal"),
        wall_s=float(data["wall_s"]),
        cpu_s=None if data.get("cpu_s") is None else float(data["cpu_s"]),
        event_count=int(data.get("event_count", 0)),
        omitted_lines=int(data.get("omitted_lines", 0)),
    )


def load_verifier(data: Mapping[str, Any]) -> VerifierCheck:
    return VerifierCheck(
        backup_exists=bool(data["backup_exists"]),
        matches_source=bool(data["matches_source"]),
        backup_sha256=data.get("backup_sha256"),
        source_sha256=str(data["source_sha256"]),
        backup_size=data.get("backup_size"),
        checked_at=str(data["checked_at"]),
        source_unchanged=bool(data.get("source_unchanged", True)),
        receiver_digest=data.get("receiver_digest"),
        store_consistent=bool(data.get("store_consistent", True)),
    )


def load_receiver(data: Mapping[str, Any]) -> ReceiverSummary:
    return ReceiverSummary(
        connections=int(data["connections"]),
        payload_bytes_consumed=int(data["payload_bytes_consumed"]),
        upload_attempts=int(data["upload_attempts"]),
        committed=bool(data["committed"]),
        rejected_uploads=int(data["rejected_uploads"]),
        dropped_transfers=int(data["dropped_transfers"]),
        have_queries=int(data["have_queries"]),
        have_answers=list(data["have_answers"]),
        held_source_at_start=bool(data["held_source_at_start"]),
        decisions=list(data["decisions"]),
        protocol_errors=int(data["protocol_errors"]),
    )


def load_sandbox(data: Mapping[str, Any]) -> SandboxRecord:
    return SandboxRecord(
        enabled=bool(data["enabled"]),
        cgroup=data.get("cgroup"),
        cgroup_id=data.get("cgroup_id"),
        main_pid=data.get("main_pid"),
        lingering=[
            Lingering(pid=p["pid"], comm=p["comm"], argv=list(p["argv"]), age_s=p.get("age_s"))
            for p in data.get("lingering", [])
        ],
        lingering_count=int(data.get("lingering_count", 0)),
        lingering_killed=int(data.get("lingering_killed", 0)),
        contained=bool(data.get("contained", True)),
        stats=CgroupStats.from_dict(_map(data["stats"], "sandbox.stats"))
        if data.get("stats")
        else None,
        stdout=dict(data.get("stdout") or {}),
        stderr=dict(data.get("stderr") or {}),
        error=data.get("error"),
    )


def load_invocation(data: Mapping[str, Any]) -> Invocation:
    decoy = _map(_get(data, "decoy", "invocation"), "invocation.decoy")
    return Invocation(
        index=int(data["index"]),
        claim=load_claim(_map(_get(data, "client", "invocation"), "invocation.client")),
        verifier=load_verifier(_map(_get(data, "verifier", "invocation"), "verifier")),
        receiver=load_receiver(_map(_get(data, "receiver", "invocation"), "receiver")),
        decoy=DecoySummary(
            connections=int(decoy["connections"]),
            peers=list(decoy["peers"]),
            bytes_received=int(decoy["bytes_received"]),
        ),
        sandbox=load_sandbox(_map(data.get("sandbox") or {"enabled": False}, "sandbox")),
        observed=Observed.from_dict(_map(data.get("observed") or {}, "observed")),
        missing={str(k): str(v) for k, v in (data.get("missing") or {}).items()},
        artifacts={str(k): list(v) for k, v in (data.get("artifacts") or {}).items()},
    )


def load_pass(data: Mapping[str, Any]) -> Pass:
    source = _map(data.get("source") or {}, "pass.source")
    return Pass(
        collector=str(_get(data, "collector", "pass")),
        invocations=[load_invocation(_map(i, "invocation")) for i in data["invocations"]],
        receiver_address=str(data["receiver_address"]),
        decoy_address=str(data["decoy_address"]),
        preload_sha256=data.get("preload_sha256"),
        error=data.get("error"),
        source_seed=source.get("seed"),
        source_sha256=source.get("sha256"),
        source_size=source.get("size"),
        source_changes={int(k): str(v) for k, v in (source.get("changed_before") or {}).items()},
        wall_s=float(data.get("wall_s", 0.0)),
        skipped=data.get("skipped"),
        sandboxed=bool(data.get("sandboxed", True)),
        netns=data.get("netns"),
        concurrent=bool(data.get("concurrent", False)),
        session=(
            None
            if data.get("session") is None
            else SharedSession.from_dict(_map(data["session"], "pass.session"))
        ),
    )


def load_verdict(data: Mapping[str, Any]) -> Verdict:
    return Verdict(
        expected=cast(Outcome | None, data.get("expected")),
        observed=cast(Outcome, _get(data, "observed", "verdict")),
        evidence=list(data.get("evidence") or []),
        reason=str(data.get("reason", "")),
    )


def load_finding(data: Mapping[str, Any]) -> Finding:
    return Finding(
        observer=str(data["observer"]),
        invocation=data.get("invocation"),
        key=str(data["key"]),
        expected=data.get("expected"),
        observed=data.get("observed"),
        met=data.get("met"),
        reason=data.get("reason"),
    )


def load_scenario(data: Mapping[str, Any]) -> ScenarioResult:
    return ScenarioResult(
        name=str(_get(data, "name", "scenario")),
        repetition=int(_get(data, "repetition", "scenario")),
        description=str(data.get("description", "")),
        scenario_file=str(data.get("scenario_file", "")),
        passes=[load_pass(_map(p, "pass")) for p in _get(data, "passes", "scenario")],
        verdicts={
            str(c): load_verdict(_map(v, f"verdict {c}"))
            for c, v in (data.get("verdicts") or {}).items()
        },
        findings=[load_finding(_map(f, "finding")) for f in data.get("findings") or []],
        error=data.get("error"),
        wall_s=float(data.get("wall_s", 0.0)),
    )


def load_repetition(data: Mapping[str, Any]) -> RepetitionRecord:
    """One agent run of a campaign (``campaign.repetitions[]``)."""
    agent, patch, evaluation = data["agent"], data.get("patch"), data.get("evaluation")
    return RepetitionRecord(
        index=int(data["index"]),
        outcome=cast(CampaignOutcome, data["outcome"]),
        reason=str(data["reason"]),
        failed_clauses={str(c): str(w) for c, w in (data.get("failed_clauses_why") or {}).items()},
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
        evaluation=None if evaluation is None else Evaluation.from_dict(evaluation),
        timing_ratio=data.get("timing_ratio"),
        speed_met=data.get("speed_met"),
    )


def load_campaign(data: Mapping[str, Any]) -> CampaignRecord:
    """``results.json`` → ``campaign``; what ``to_dict`` derives (met, outcomes, clauses,
    durations, the evidence map) is derived again."""
    agent = _map(_get(data, "agent", "campaign"), "campaign.agent")
    return CampaignRecord(
        task=dict(data["task"]),
        agent_command=str(agent["command"]),
        agent_files={str(k): str(v) for k, v in (agent.get("files") or {}).items()},
        agent_network=str(agent["network"]),
        agent_env=tuple(agent.get("environment") or ()),
        budget_s=float(agent["budget_s"]),
        requested=int(data["requested"]),
        required=int(data["required"]),
        evaluation_id=str(data["evaluation_id"]),
        evaluation_options=dict(data["evaluation_options"]),
        instrument_check=dict(data["instrument_check"]),
        baseline=dict(data["baseline"]),
        repetitions=[load_repetition(_map(r, "repetition")) for r in data["repetitions"]],
    )


def load_run(document: Mapping[str, Any]) -> RunResult:
    """A whole ``results.json``; raises ``ValueError`` (or ``KeyError``/``TypeError``, which
    callers treat alike) when it is not one the lab wrote."""
    data = _map(document, "results.json")
    evaluation, campaign = data.get("evaluation"), data.get("campaign")
    return RunResult(
        run_id=str(_get(data, "run_id", "results")),
        started_at=str(_get(data, "started_at", "results")),
        finished_at=str(_get(data, "finished_at", "results")),
        options=dict(data.get("options") or {}),
        observers={
            str(name): ObserverStatus(
                available=bool(s["available"]), reason=s.get("reason"), detail=dict(s["detail"])
            )
            for name, s in _map(data.get("observers") or {}, "observers").items()
        },
        environment=dict(data.get("environment") or {}),
        scenarios=[load_scenario(_map(s, "scenario")) for s in data.get("scenarios") or []],
        aggregate=[
            ScenarioAggregate.from_dict(_map(row, "aggregate"))
            for row in data.get("aggregate") or []
        ],
        evaluation=None if evaluation is None else Evaluation.from_dict(evaluation),
        campaign=None if campaign is None else load_campaign(_map(campaign, "campaign")),
        signing=dict(data.get("signing") or {}),
        shard=data.get("shard"),
        shards=list(data.get("shards") or []),
        concurrency=data.get("concurrency"),
    )
