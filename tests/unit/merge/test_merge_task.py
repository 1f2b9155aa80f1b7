"""A fixture task's ``lab campaign --shard I/N``: each shard plans only its repetitions with
the run id every shard shares, and ``lab merge`` of the shards (synthetic results, signed)
gives the campaign an unsharded run would have written: k of N, the clauses' counts, the
interval, the task's evidence map, every repetition under repetitions/rN/, the task and
its calibration; shards of another task, evaluation or calibration are refused in one
sentence."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lab import __version__
from lab.campaign.shard import plan_repetitions
from lab.campaign.task import CampaignRequest
from lab.evidence.archive import write_archive
from lab.evidence.provenance import ProvenanceInputs
from lab.evidence.signing import Signer
from lab.evidence.verify import verify_archive
from lab.merge.combine import MergeRequest, merge
from lab.model import RunResult
from lab.model.campaign import AgentRecord, CampaignRecord, PatchRecord, RepetitionRecord
from lab.model.task import CandidateInfo, RepetitionJudgement, TaskEvaluation, Verdict
from lab.run.shard import ShardSpec, Unit, shard_record, shard_run_id
from lab.schemas import RESULTS_SCHEMA_FILE, schema_bytes, validate_results
from lab.workloads import campaign as task_campaign
from lab.workloads.campaign import EVIDENCE, campaign_document
from lab.workloads.task import load_fixture_task
from tests.unit.merge.shard_archives import refused
from tests.unit.reports.reports_sample import build_sample_run

SHELL = Path(__file__).resolve().parents[2] / "assets" / "tasks" / "shell" / "task.yaml"
COMMIT = "c0" * 20
MET = {1: True, 2: False, 3: True}
#: the observers and environment a run records (a fixture task's run records them too)
SAMPLE = build_sample_run()


def test_a_task_campaign_shard_plans_its_repetitions() -> None:
    task = load_fixture_task(SHELL)

    def plan(index: int, count: int, **kw: Any) -> Any:
        kw.setdefault("agent_cmd", "sh agent.sh")
        request = CampaignRequest(task_path=SHELL, shard=ShardSpec(index, count), **kw)
        repetitions, required, budget = task_campaign._settle(request, task)
        return task_campaign._plan(request, task, repetitions, required, budget)

    parts = [plan(i, 2, repetitions=5) for i in (1, 2)]
    assert [p.indices for p in parts] == [[1, 3, 5], [2, 4]]
    assert parts[0].frozen_id == parts[1].frozen_id and parts[0].frozen_id.startswith("campaign-")
    assert parts[1].run_id == f"{parts[1].frozen_id}-shard2of2"
    assert parts[0].record["unit"] == "campaign" and parts[0].record["count"] == 2
    assert plan(1, 2, repetitions=4).frozen_id != parts[0].frozen_id
    assert plan(1, 2, repetitions=5, agent_cmd="sh other.sh").frozen_id != parts[0].frozen_id
    assert plan(1, 2, repetitions=5, run_id="shells-1").frozen_id == "shells-1"
    assert (
        task_campaign._plan(CampaignRequest(task_path=SHELL, agent_cmd="sh a.sh"), task, 3, 3, 30.0)
        is None
    )
    with pytest.raises(Exception, match="leave a shard with nothing to do"):
        plan(3, 3, repetitions=2)


def test_the_shared_run_id_is_the_backup_campaigns_digest() -> None:
    """A backup campaign's shards keep the run id they derived before tasks could shard."""
    request = CampaignRequest(task_path=SHELL, agent_cmd="true", shard=ShardSpec(1, 2))
    common = {"task_sha256": "t", "budget_s": 30.0, "repetitions": 2, "required": 2}
    one = plan_repetitions(request, evaluation_id="e1", **common)  # type: ignore[arg-type]
    two = plan_repetitions(request, evaluation_id="e2", **common)  # type: ignore[arg-type]
    assert one.frozen_id != two.frozen_id and one.indices == [1]


def judged(index: int, met: bool) -> TaskEvaluation:
    cand = CandidateInfo(
        kind="patch",
        name="patch.diff",
        sha256=f"{index:064x}",
        files_changed=("value.txt",),
        outside_editable=(),
        protected_changed=(),
    )
    verdict = Verdict("pass", "check exited 0") if met else Verdict("fail", "check exited 1")
    rep = RepetitionJudgement(
        index=1,
        commands={"check": {"exit_status": 0 if met else 1}},
        oracle=None,
        verdicts={"T1": verdict, "T2": Verdict("pass", "lint exited 0")},
    )
    evaluation = TaskEvaluation(task={"name": "shell"}, candidate=cand, repetitions=[rep])
    evaluation.conclude(("T1", "T2"))
    return evaluation


def repetition(index: int) -> RepetitionRecord:
    met = MET[index]
    return RepetitionRecord(
        index=index,
        outcome="met" if met else "failed",
        reason="every clause of the task passed" if met else "T1 fail: check exited 1",
        failed_clauses={} if met else {"T1": "fail: check exited 1"},
        baseline_commit=COMMIT,
        agent=AgentRecord(
            exit_status=0,
            timed_out=False,
            duration_s=1.0 + index,
            lingering_count=0,
            contained=True,
            sandbox_error=None,
            stdout_bytes=3,
            stderr_bytes=0,
        ),
        patch=PatchRecord(
            sha256=f"{index:064x}",
            bytes=10,
            files_changed=("value.txt",),
            outside_native=(),
            native_empty=False,
            final_commit="f" * 40,
            bundle_sha256="b" * 64,
        ),
        evaluation=judged(index, met),
    )


def calibration(key: str) -> dict[str, Any]:
    """The task's calibration as a shard found it (lab.workloads.calibrate)."""
    seeds = {
        "fix": {"expected": [], "broken": [], "met": True},
        "lint-breaker": {"expected": ["T2"], "broken": ["T2"], "met": True},
    }
    return {
        "met": 2,
        "total": 2,
        "ok": True,
        "seeds": seeds,
        "key": key * 64,
        "parts": {},
        "reused_from": None,
    }


def whole(**kw: Any) -> CampaignRecord:
    record = CampaignRecord(
        task=load_fixture_task(SHELL).to_dict(),
        agent_command="sh agent.sh",
        agent_files={"agent.sh": "a" * 64},
        agent_network="none",
        budget_s=30.0,
        requested=3,
        required=2,
        evaluation_id="e" * 64,
        evaluation_options={"repetitions": 1, "limits": {"memory_max": 1}},
        instrument_check=calibration("k"),
        baseline={"must": "fail", "status": "fail", "shown": True},
        repetitions=[repetition(i) for i in (1, 2, 3)],
    )
    return replace(record, **kw)


def pack(
    tmp: Path,
    signer: Signer,
    spec: ShardSpec,
    *,
    task_sha: str = "s" * 64,
    run_id: str = "campaign-t",
    **kw: Any,
) -> Path:
    """A shard's run directory as ``lab campaign --task --shard`` writes it, signed."""
    mine = [i for i in (1, 2, 3) if (i - 1) % spec.count == spec.index - 1]
    record = whole(**kw)
    record = replace(record, repetitions=[r for r in record.repetitions if r.index in mine])
    units = [Unit("agent", i) for i in mine]
    run = RunResult(
        run_id=shard_run_id(run_id, spec),
        started_at=f"2026-12-02T17:0{spec.index}:00Z",
        finished_at=f"2026-12-02T17:1{spec.index}:00Z",
        options={
            "mode": "campaign-task",
            "task": "task.yaml",
            "task_sha256": task_sha,
            "agent_repetitions": 3,
            "require": 2,
            "budget_s": 30.0,
            "agent_command": "sh agent.sh",
            "agent_network": "none",
            "lab_version": __version__,
        },
        observers=SAMPLE.observers,
        environment=dict(SAMPLE.environment),
        shard=shard_record(spec, units, run_id, "campaign"),
    )
    run.campaign = record
    run_dir = tmp / f"s{spec.index}{task_sha[:1]}" / run.run_id
    for i in mine:
        rep = run_dir / "repetitions" / f"r{i}"
        rep.mkdir(parents=True)
        (rep / "repetition.json").write_text(json.dumps(repetition(i).to_dict()))
        (rep / "patch.diff").write_text(f"patch {i}\n")
    for rel in (
        "task/task.yaml",
        "calibration/seeds.json",
        "baseline/check.stdout",
        "campaign/campaign.json",
    ):
        (run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / rel).write_text(f"{rel}\n")
    (run_dir / "commands.jsonl").write_text(json.dumps({"argv": ["sh"], "i": spec.index}) + "\n")
    document = {
        "$schema": RESULTS_SCHEMA_FILE,
        **run.to_dict(),
        "campaign": campaign_document(record),
        "calibration": {"met": 3, "total": 3},
    }
    validate_results(document)
    (run_dir / RESULTS_SCHEMA_FILE).write_bytes(schema_bytes(RESULTS_SCHEMA_FILE))
    (run_dir / "results.json").write_text(json.dumps(document, sort_keys=True))
    inputs = ProvenanceInputs(
        run_id=run.run_id, started_on=run.started_at, finished_on=run.finished_at, scenarios=[]
    )
    return write_archive(run_dir, signer=signer, provenance_inputs=inputs, epoch=0).path


def test_merged_task_campaign_equals_the_unsharded_one(
    tmp_path: Path, key: tuple[Signer, Path]
) -> None:
    signer, pubkey = key
    archives = [pack(tmp_path, signer, ShardSpec(i, 2)) for i in (1, 2)]
    outcome = merge(MergeRequest(archives=archives, pubkey=pubkey, out=tmp_path / "m"), say=print)
    run_dir = outcome.run_dir
    document = json.loads((run_dir / "results.json").read_text())
    unsharded = json.loads(json.dumps(campaign_document(whole())))
    assert document["campaign"] == unsharded
    assert document["campaign"]["met"] == 2 and document["campaign"]["succeeded"] is True
    assert document["campaign"]["evidence"][0]["where"] == EVIDENCE[0][1]
    assert document["calibration"] == {"met": 3, "total": 3}
    assert document["run_id"] == "campaign-t" and "shard" not in document
    assert [s["index"] for s in document["shards"]] == [1, 2]
    assert document["shards"][1]["units"] == [{"campaign": "agent", "repetition": 2}]
    for i in (1, 2, 3):
        assert (run_dir / "repetitions" / f"r{i}" / "patch.diff").read_text() == f"patch {i}\n"
    for rel in (
        "task/task.yaml",
        "calibration/seeds.json",
        "baseline/check.stdout",
        "campaign/campaign.json",
        "shards/2/results.json",
        "report.md",
    ):
        assert (run_dir / rel).is_file(), rel
    assert "The nine evidence items" in (run_dir / "report.md").read_text()
    rows = [json.loads(line) for line in (run_dir / "commands.jsonl").read_text().splitlines()]
    assert [r["shard"] for r in rows] == [1, 2]
    assert outcome.archive is not None
    assert verify_archive(Path(outcome.archive.path), pubkey=pubkey).authenticity_established


def test_shards_of_another_task_are_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pubkey = key
    one = pack(tmp_path, signer, ShardSpec(1, 2))
    other = pack(tmp_path, signer, ShardSpec(2, 2), task_sha="o" * 64)
    refused([one, other], pubkey, tmp_path, "differ in task", "one task's campaign")


def test_shards_of_another_evaluation_or_calibration_are_refused(
    tmp_path: Path, key: tuple[Signer, Path]
) -> None:
    signer, pubkey = key
    one = pack(tmp_path, signer, ShardSpec(1, 2))
    other = pack(tmp_path, signer, ShardSpec(2, 2), evaluation_id="d" * 64)
    refused([one, other], pubkey, tmp_path, "differ in evaluation id")
    tmp = tmp_path / "c"
    one = pack(tmp, signer, ShardSpec(1, 2))
    other = pack(tmp, signer, ShardSpec(2, 2), instrument_check=calibration("j"))
    refused([one, other], pubkey, tmp, "differ in calibration key")


def test_shards_of_different_runs_are_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pubkey = key
    one = pack(tmp_path, signer, ShardSpec(1, 2))
    other = pack(tmp_path, signer, ShardSpec(2, 2), task_sha="o" * 64, run_id="campaign-u")
    refused([one, other], pubkey, tmp_path, "differ in run id")
