"""Each judged verification of a campaign as a signed in-toto Test Result statement: the
tested patch as subject, the frozen evaluation and the task as configuration, the clauses
as passed / failed tests; opened with the run's public key like the provenance."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from lab.errors import SigningError
from lab.evidence.provenance import open_envelope
from lab.evidence.signing import Signer
from lab.evidence.test_result import PREDICATE_TYPE, TEST_RESULTS, write_test_results
from lab.model.campaign import AgentRecord, CampaignRecord, RepetitionRecord
from lab.model.trajectory import JudgedSnapshot, TrajectoryRecord


def rep(
    index: int, outcome: str, failed: dict[str, str], shots: list[JudgedSnapshot]
) -> RepetitionRecord:
    from unittest.mock import MagicMock

    evaluation = MagicMock()
    evaluation.clauses = {"C1": {}, "C2": {}}
    return RepetitionRecord(
        index=index, outcome=outcome, reason="", failed_clauses=failed, baseline_commit="0" * 40,  # type: ignore[arg-type]
        agent=AgentRecord(exit_status=0, timed_out=False, duration_s=1.0, lingering_count=0,
                          contained=True, sandbox_error=None, stdout_bytes=0, stderr_bytes=0),
        patch=None, evaluation=None if outcome == "build-failed" else evaluation,
        trajectory=TrajectoryRecord(taken=len(shots), distinct=len(shots), judged=tuple(shots),
                                    plateau_k=3, plateau_at=None, regressions=()),
    )  # fmt: skip


def test_every_judged_verification_is_a_signed_statement(tmp_path: Path) -> None:
    for rel in (
        "evaluation.json",
        "campaign/task.yaml",
        "repetitions/r1/native.patch",
        "repetitions/r1/trajectory/s1/native.patch",
        "repetitions/r2/native.patch",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)  # fmt: skip
    broken = JudgedSnapshot(index=1, at_s=0.5, commit="a" * 40, status="build-failed", clauses={})
    record = CampaignRecord(
        task={"clauses": ["C1", "C2"]}, agent_command="sh a.sh", agent_files={},
        agent_network="host", budget_s=10, requested=2, required=1, evaluation_id="e",
        evaluation_options={}, instrument_check={}, baseline={},
        repetitions=[rep(1, "failed", {"C2": "fail"}, [broken]), rep(2, "build-failed", {}, [])],
    )  # fmt: skip
    signer = Signer.ephemeral()
    assert write_test_results(tmp_path, record, signer) == 3
    lines = (tmp_path / TEST_RESULTS).read_text().splitlines()
    statements = [open_envelope(json.loads(line), signer.public_key, what="test result")
                  for line in lines]  # fmt: skip
    first = statements[0]
    assert first["predicateType"] == PREDICATE_TYPE
    assert first["subject"] == [{"name": "repetitions/r1/native.patch", "digest": {
        "sha256": hashlib.sha256(b"repetitions/r1/native.patch").hexdigest()}}]  # fmt: skip
    predicate = first["predicate"]
    assert (predicate["result"], predicate["passedTests"], predicate["failedTests"]) == (
        "FAILED", ["C1"], ["C2"])  # fmt: skip
    assert [c["name"] for c in predicate["configuration"]] == [
        "evaluation.json",
        "campaign/task.yaml",
    ]
    assert statements[1]["subject"][0]["name"] == "repetitions/r1/trajectory/s1/native.patch"
    assert statements[1]["predicate"]["failedTests"] == ["build"]
    assert statements[2]["predicate"]["failedTests"] == ["build"]
    with pytest.raises(SigningError):  # another key does not open them
        open_envelope(json.loads(lines[0]), Signer.ephemeral().public_key, what="test result")
    assert write_test_results(tmp_path, record, None) == 0
