"""The campaign record: outcomes, k of N, per-clause k/N, the --json rows, the schema, and
the report's wording (capability versus reliability, the nine evidence items)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from lab.errors import CampaignError
from lab.model.campaign import (
    EVIDENCE,
    AgentRecord,
    CampaignRecord,
    Outcome,
    PatchRecord,
    RepetitionRecord,
)
from lab.reports.campaign import (
    campaign_headline,
    campaign_lines,
    campaign_sections,
    reliability_sentence,
)
from lab.schemas import results_schema


def agent(seconds: float = 2.0, *, timed_out: bool = False) -> AgentRecord:
    return AgentRecord(
        exit_status=None if timed_out else 0,
        timed_out=timed_out,
        duration_s=seconds,
        lingering_count=0,
        contained=True,
        sandbox_error=None,
        stdout_bytes=10,
        stderr_bytes=0,
    )


def patch() -> PatchRecord:
    return PatchRecord(
        sha256="a" * 64,
        bytes=120,
        files_changed=("native/main.c",),
        outside_native=(),
        native_empty=False,
        final_commit="b" * 40,
        bundle_sha256="c" * 64,
    )


def rep(index: int, outcome: Outcome, failed: dict[str, str] | None = None) -> RepetitionRecord:
    return RepetitionRecord(
        index=index,
        outcome=outcome,
        reason="because",
        failed_clauses=failed or {},
        baseline_commit="d" * 40,
        agent=agent(float(index), timed_out=outcome == "timed-out"),
        patch=patch(),
        timing_ratio=0.9 if outcome == "met" else None,
    )


def record(*reps: RepetitionRecord, required: int = 1) -> CampaignRecord:
    return CampaignRecord(
        task={"name": "speedup", "file": "speedup.yaml", "sha256": "e" * 64,
              "clauses": ["C1", "C2", "C3", "C4", "C5", "C6"], "speed": None},
        agent_command="sh agent.sh",
        agent_files={"agent.sh": "f" * 64},
        agent_network="host",
        budget_s=60.0,
        requested=len(reps),
        required=required,
        evaluation_id="eval-0123",
        evaluation_options={"repetitions": 1},
        instrument_check={"ok": True},
        baseline={"must": "pass", "status": "pass", "shown": True},
        repetitions=list(reps),
    )  # fmt: skip


def test_k_of_n_and_per_clause_counts() -> None:
    r = record(
        rep(1, "met"),
        rep(2, "failed", {"C1": "fail", "C6": "fail"}),
        rep(3, "timed-out"),
        required=2,
    )
    assert (r.met, r.total, r.succeeded) == (1, 3, False)
    # a repetition counts for a clause only when its candidate was judged and passed it
    assert r.clause_counts()["C1"] == 0  # no evaluation records in these rows
    assert r.outcome_counts()["timed-out"] == 1
    assert r.duration_spread() == {"median": 2.0, "min": 1.0, "max": 3.0}


def test_the_json_rows_have_the_issue_s_shape() -> None:
    row = rep(2, "failed", {"C3": "fail"}).row()
    assert row == {
        "index": 2,
        "outcome": "failed",
        "failed_clauses": ["C3"],
        "duration_s": 2.0,
        "patch_sha256": "a" * 64,
        "timing_ratio": None,
        "timing_ratio_interval": None,
        # the agent's network was not witnessed (--agent-network host): nothing is claimed
        "agent_verdicts": {"A1": "not-observed"},
        "model_requests": None,
        "tokens": None,
        "escalation": None,
    }


def test_the_record_matches_the_results_schema() -> None:
    document = record(rep(1, "met"), rep(2, "no-change")).to_dict()
    schema = results_schema()["properties"]["campaign"]
    jsonschema.validate(document, schema)
    assert len(document["evidence"]) == 9 == len(EVIDENCE)
    assert document["clauses"]["C1"] == {"met": 0, "total": 2, "interval": [0.0, 0.8419]}
    # 1 of 2: binom.test(1, 2) gives 0.01257912 0.98742088
    assert document["interval"] == [0.0126, 0.9874] and document["interval_method"] == (
        "clopper-pearson"
    )


@pytest.mark.parametrize(
    ("outcomes", "words"),
    [
        (["met"], "One success demonstrates capability, not reliability"),
        (["met", "failed", "met"], "capability demonstrated, reliability 2/3"),
        (["failed", "failed", "failed"], "0 of 3 met the task: capability not demonstrated"),
        # the issue's sentence: one-sided, and said to be
        (["failed", "failed", "failed"], "compatible with a true success rate up to 63 % "
         "(one-sided 95 %, Clopper–Pearson exact upper bound)"),
        (["met", "failed", "met"], "the true success rate lies in the two-sided 95 % CI "
         "9 %–99 % (Clopper–Pearson exact)"),
        (["met", "failed", "met"], "pass@3 1.00, pass^3 0.00"),
        (["met", "met", "met"], "at least 37 % (one-sided 95 %, Clopper–Pearson exact lower"),
    ],
)  # fmt: skip
def test_capability_versus_reliability(outcomes: list[Outcome], words: str) -> None:
    r = record(*(rep(i, o) for i, o in enumerate(outcomes, start=1)))
    assert words in reliability_sentence(r)
    assert words in campaign_headline(r)


def test_the_report_sections_list_every_repetition_and_the_evidence() -> None:
    r = record(rep(1, "met"), rep(2, "build-failed"))
    sections = dict(campaign_sections(r))
    table = sections["Repetitions"]
    assert [row[1] for row in table.rows] == ["met", "build-failed"]  # type: ignore[union-attr]
    evidence = sections["Evidence of every agent run"]
    assert len(evidence.rows) == 9  # type: ignore[union-attr]
    assert any("final.bundle" in row[2] for row in evidence.rows)  # type: ignore[union-attr]
    assert sections["What this campaign does not prove"]
    assert any(line.startswith("  r2: build-failed") for line in campaign_lines(r))


def test_a_missing_task_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lab import _cli

    code = _cli.main(
        ["campaign", "--task", str(tmp_path / "none.yaml"), "--agent-cmd", "true", "--local",
         "--out", str(tmp_path)]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "no such task file" in err and "Traceback" not in err


def test_require_over_repetitions_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab import _cli
    from tests.conftest import ROOT

    code = _cli.main(
        ["campaign", "--task", str(ROOT / "campaigns" / "speedup.yaml"), "--agent-cmd", "true",
         "--repetitions", "2", "--require", "3", "--local", "--out", str(tmp_path)]
    )  # fmt: skip
    assert code == 2
    assert "--require 3 must be between 1 and --repetitions (2)" in capsys.readouterr().err


def test_campaign_error_is_a_usage_class_error() -> None:
    assert CampaignError("x").exit_code == 2


def test_the_statistics_are_stored_not_drawn() -> None:
    """pass@k and pass^k for k = 1..N, the interval and its method: figures of the model."""
    r = record(rep(1, "met"), rep(2, "failed"), rep(3, "met"))
    stats = r.statistics()
    assert stats["interval"] == [0.0943, 0.9916]
    assert stats["interval_method"] == "clopper-pearson" and stats["interval_confidence"] == 0.95
    assert stats["pass_at_k"] == {"1": 0.6667, "2": 1.0, "3": 1.0}
    assert stats["pass_hat_k"] == {"1": 0.6667, "2": 0.3333, "3": 0.0}
    assert stats["upper_bound_one_sided"] == 0.983
    assert "C(c,k)/C(n,k)" in stats["pass_hat_k_estimator"]
    table = dict(campaign_sections(r))["Aggregate"]
    assert table.rows[0][:3] == [  # type: ignore[union-attr]
        "met the task", "2/3", "95 % CI 9 %–99 % (Clopper–Pearson exact)"
    ]  # fmt: skip


def test_the_campaign_json_document_matches_its_schema() -> None:
    from lab.model.campaign import campaign_statistics
    from lab.schemas import validate_document

    r = record(rep(1, "met"), rep(2, "failed", {"C3": "fail"}))
    document = {
        "delegated_to_image": False,
        "repetitions": [x.row() for x in r.repetitions],
        "met": r.met,
        "required": r.required,
        "archive": "/tmp/x.tar.gz",
        "archive_sha256": "0" * 64,
        "exit_status": 0,
        **campaign_statistics(r),
    }
    validate_document(document, "campaign-summary")
    assert document["interval"] == [0.0126, 0.9874]
    delegated = {**document, "repetitions": [], "met": None, **campaign_statistics(None)}
    validate_document(delegated, "campaign-summary")
    broken = {**document, "repetitions": [{**document["repetitions"][0], "tokens": 3}]}
    with pytest.raises(Exception, match="campaign-summary"):
        validate_document(broken, "campaign-summary")
