"""A fixture-task run's report (lab.reports.task) drawn by all three presenters from one
outline: the clauses with k/N and their interval, the failing baseline, the calibration
(reused from a named archive), S3's kernel witness lines and, for a campaign, the nine
evidence items."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path
from typing import Any

from lab.model.task import CandidateInfo, RepetitionJudgement, TaskEvaluation, Verdict
from lab.reports.html import render_html
from lab.reports.markdown import render_markdown
from lab.reports.pdf import render_pdf
from lab.reports.task import task_outline
from tests.conftest import require
from tests.unit.model.test_campaign import record, rep
from tests.unit.reports.reports_sample import build_sample_run

WITNESS = (
    'openat outside the root: /tmp/outside/x\n[pid 7] openat(AT_FDCWD</r>, "x", O_WRONLY|O_CREAT)'
)


def evaluation_document() -> dict[str, Any]:
    cand = CandidateInfo(kind="patch", name="ctw.patch", sha256="ab" * 32, files_changed=(
        "store.go",), outside_editable=(), protected_changed=())  # fmt: skip
    rep = RepetitionJudgement(
        index=1,
        commands={"test": {"exit_status": 0, "wall_s": 1.5, "timed_out": False}},
        oracle={"clauses": {}, "figures": {"kernel_witness": WITNESS}},
        verdicts={
            "S1": Verdict("pass", "test exited 0"),
            "S3": Verdict(
                "fail",
                "the kernel saw 1 call(s) write outside the root",
                ("strace-files.txt", "s3-violations.txt"),
            ),
        },
    )
    judged = TaskEvaluation(task={"name": "safe-store", "workload": "safestore",
                                  "requirements": {"S3": "contained"}}, candidate=cand)  # fmt: skip
    judged.repetitions.append(rep)
    judged.conclude(("S1", "S3"))
    judged.calibration = {
        "met": 5, "total": 5, "key": "k" * 64,
        "reused_from": {"archive": "evaluation-A.tar.gz", "archive_sha256": "c" * 64,
                        "run_id": "evaluation-A", "verified": "40 checks passed",
                        "authenticity": "integrity only"},
        "seeds": {"correct": {"expected": [], "broken": [], "met": True}},
    }  # fmt: skip
    document = judged.to_dict()
    document["baseline"] = {
        "must": "fail", "status": "fail",
        "commands": {"test": {"exit_status": 1, "passed": False, "wall_s": 30.0}},
        "oracle": {"verdicts": {"S3": {"observed": "fail", "reason": "escaped"}}},
    }  # fmt: skip
    return {"evaluation": document, "signing": {"key_id": "818B8D874C6240CB", "ephemeral": True}}


def test_every_presenter_draws_the_task_outline(tmp_path: Path) -> None:
    run = build_sample_run()
    sections = task_outline(evaluation_document())
    md = render_markdown(run, files=None, outline=sections)
    for text in ("| S3 | contained | 0/1 |", "0–98 %", "must fail its baseline commands: it did",
                 "Reused, not judged in this run: kept in evaluation-A.tar.gz",
                 "[pid 7] openat(AT_FDCWD</r>", "s3-violations.txt"):  # fmt: skip
        assert text in md, text
    html = render_html(run, files=None, outline=sections)
    assert "[pid 7] openat(AT_FDCWD&lt;/r&gt;" in html and "evaluation-A.tar.gz" in html
    render_pdf(run, tmp_path / "report.pdf", files=None, outline=sections)
    tool = shutil.which("pdftotext")
    require("pdftotext", tool is not None, "pdftotext not installed (poppler-utils)")
    assert tool is not None
    text = subprocess.run([tool, str(tmp_path / "report.pdf"), "-"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    assert "S3: the kernel as a witness" in text and "evaluation-A.tar.gz" in text


def test_a_campaign_shows_the_nine_evidence_items() -> None:
    evaluation = evaluation_document()["evaluation"]
    campaign = {
        "task": {"name": "safe-store", "workload": "safestore"},
        "agent": {"command": "sh agent.sh", "budget_s": 60},
        "met": 0, "required": 1, "baseline": {"must": "fail", "status": "fail"},
        "repetitions": [{"index": 1, "outcome": "failed", "failed_clauses": ["S3"],
                         "duration_s": 3.0, "patch_sha256": "d" * 64, "evaluation": evaluation}],
        "clauses": {"S3": {"met": 0, "total": 1, "interval": [0.0, 0.975]}},
        "instrument_check": evaluation["calibration"],
        "evidence": [{"item": f"item {i}", "where": f"where {i}"} for i in range(1, 10)],
        "not_proven": ["k of N bounds reliability"],
    }  # fmt: skip
    md = render_markdown(
        build_sample_run(), files=None, outline=task_outline({"campaign": campaign})
    )
    assert "The nine evidence items" in md and "- item 9: where 9" in md
    assert "| S3 | 0/1 | 0–98 % |" in md and "repetition 1, r1: S3 fail" in md


def test_a_task_campaign_with_escalation_shows_each_tier() -> None:
    first = dataclasses.replace(rep(1, "failed", {"T1": "fail: check exited 1"}),
                                escalation=rep(1, "met"))  # fmt: skip
    campaign = dataclasses.replace(
        record(first, rep(2, "met")),
        task={"name": "shell", "workload": "none", "clauses": ["T1", "T2"]},
        escalate_command="sh fix.sh",
        instrument_check={},
    )
    md = render_markdown(
        build_sample_run(), files=None, outline=task_outline({"campaign": campaign.to_dict()})
    )
    assert "## Escalation" in md and "Escalated to: sh fix.sh" in md
    assert "| tier 1: the agent | 1/2 | 1–99 % | 3.0 | unread |" in md
    assert "| tier 2: escalated (--escalate-cmd) | 1/1 | 2–100 % | 1.0 | unread |" in md
    assert "| per verified success (both tiers) | 2 |  | 2.0 | unread |" in md
    assert "r1: failed → escalated: met; failed clauses: none" in md
    plain = dataclasses.replace(campaign, escalate_command=None)
    md = render_markdown(
        build_sample_run(), files=None, outline=task_outline({"campaign": plain.to_dict()})
    )
    assert "Escalation" not in md
