"""--escalate-cmd's evidence package (what a second agent is given, checksummed and signed)
and the record of an escalated repetition: its --json row, the tiers, the report."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from lab import intervals
from lab.campaign.escalate import NATIVE_JUDGED, OUTPUT_TAIL, needs_escalation, write_package
from lab.campaign.task import CampaignRequest, load_task
from lab.errors import UsageError
from lab.evidence.signing import Signer, verify_detached
from lab.model.campaign import RepetitionRecord
from lab.model.task import CandidateInfo, RepetitionJudgement, TaskEvaluation, Verdict
from lab.model.trajectory import JudgedSnapshot, mark
from lab.reports.campaign import campaign_lines, campaign_sections
from lab.workloads.campaign import JUDGED, _settle
from lab.workloads.task import load_fixture_task
from tests.conftest import ASSETS
from tests.unit.model.test_campaign import record, rep

TASK = ASSETS / "campaigns" / "quick-speedup.yaml"


def plateaued(rep_dir: Path) -> RepetitionRecord:
    """A run stopped on a plateau whose two judged snapshots failed C1 and C6."""
    for n in (1, 3):
        (rep_dir / "trajectory" / f"s{n}").mkdir(parents=True)
        (rep_dir / "trajectory" / f"s{n}" / "native.patch").write_text(f"patch {n}\n")
    (rep_dir / "native.patch").write_text("final\n")
    fails = {c: "fail" if c in ("C1", "C6") else "pass" for c in ("C1", "C2", "C6")}
    rows = [JudgedSnapshot(index=n, at_s=float(n), commit=f"{n:040x}", status="judged",
                           clauses=fails) for n in (1, 3)]  # fmt: skip
    base = rep(1, "plateaued", {"C1": "the saved backup differs", "C6": "claimed ok"})
    return dataclasses.replace(base, reason="stopped on a plateau at snapshot 3",
                               trajectory=mark(rows, plateau_k=1, taken=3, distinct=2))  # fmt: skip


def test_only_runs_that_did_not_meet_the_task_are_escalated() -> None:
    assert [needs_escalation(rep(1, o)) for o in ("met", "no-change", "agent-crashed")] == [
        False, False, False,
    ]  # fmt: skip
    assert all(needs_escalation(rep(1, o)) for o in ("failed", "timed-out", "plateaued"))


def test_the_package_holds_every_attempt_and_is_signed(tmp_path: Path) -> None:
    signer = Signer.ephemeral()
    package = write_package(tmp_path / "package", rep=plateaued(tmp_path), rep_dir=tmp_path,
                            task=load_task(TASK), signer=signer)  # fmt: skip
    names = sorted(str(p.relative_to(package)) for p in package.rglob("*") if p.is_file())
    assert names == [
        "README.md", "SHA256SUMS", "SHA256SUMS.sig", "TASK.md", "constraints.json",
        "lab.pub", "patches/final.patch", "patches/s1.patch", "patches/s3.patch",
        "stop.json", "verification.json",
    ]  # fmt: skip
    sums = (package / "SHA256SUMS").read_bytes()
    verify_detached(sums, (package / "SHA256SUMS.sig").read_text(), signer.public_key,
                    what="the package's SHA256SUMS")  # fmt: skip
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=package, capture_output=True)
    assert checked.returncode == 0, checked.stdout
    verification = json.loads((package / "verification.json").read_text())
    assert [s["failed_clauses"] for s in verification["snapshots"]] == [["C1", "C6"]] * 2
    assert verification["final"]["outcome"] == "plateaued"
    stop = json.loads((package / "stop.json").read_text())
    assert stop["outcome"] == "plateaued" and "plateau" in stop["reason"]
    constraints = json.loads((package / "constraints.json").read_text())
    assert constraints["clauses_deciding_success"] == ["C1", "C2", "C3", "C4", "C5", "C6"]
    assert constraints["commands_deciding_success"]  # the verification commands
    (package / "patches" / "s1.patch").write_text("tampered\n")
    again = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=package, capture_output=True)
    assert again.returncode != 0


def test_an_escalated_repetition_in_the_row_the_tiers_and_the_report(tmp_path: Path) -> None:
    first = plateaued(tmp_path)
    second = dataclasses.replace(rep(1, "met"), reason="every required clause passed")
    escalated = dataclasses.replace(first, escalation=second)
    assert escalated.row()["escalation"] == {"outcome": "met", "failed_clauses": []}
    assert first.row()["escalation"] is None
    campaign = dataclasses.replace(record(escalated, rep(2, "met")), escalate_command="sh b.sh")
    tiers = campaign.tiers()
    assert tiers["tiers"]["1"] == {"runs": 2, "met": 1, "agent_s": 3.0, "tokens": None,
                                   "interval": list(intervals.interval(1, 2))}  # fmt: skip
    assert tiers["tiers"]["2"] == {"runs": 1, "met": 1, "agent_s": 1.0, "tokens": None,
                                   "interval": list(intervals.interval(1, 1))}  # fmt: skip
    # 4 s of agent time in all (1 + 2, then 1 escalated) bought 2 verified successes
    assert tiers["verified_successes"] == 2 and tiers["agent_s_per_success"] == 2.0
    again = RepetitionRecord.from_dict(json.loads(json.dumps(escalated.to_dict())))
    assert again.escalation is not None and again.escalation.outcome == "met"
    sections = dict(campaign_sections(campaign))
    assert "Escalation" in sections
    assert not any(name == "Escalation" for name, _ in campaign_sections(record(first)))
    lines = "\n".join(campaign_lines(campaign))
    assert "escalated: met" in lines and "escalation cost: agent" in lines


@pytest.mark.parametrize("outcome", ["failed", "timed-out"])
def test_a_package_without_snapshots_still_says_why(tmp_path: Path, outcome: str) -> None:
    run = dataclasses.replace(rep(1, outcome, {"C2": "re-uploaded"}), reason="why")  # type: ignore[arg-type]
    package = write_package(tmp_path / "p", rep=run, rep_dir=tmp_path, task=load_task(TASK),
                            signer=None)  # fmt: skip
    assert json.loads((package / "verification.json").read_text())["snapshots"] == []
    assert not (package / "SHA256SUMS.sig").exists()  # no key, no signature claimed
    assert json.loads((package / "stop.json").read_text())["outcome"] == outcome


def failed_task_run(rep_dir: Path) -> RepetitionRecord:
    """A shell fixture task's run whose patch failed T1 (check.sh), its outputs kept."""
    (rep_dir / "native.patch").write_text("-1\n+3\n")
    commands = rep_dir / "judged" / "repetitions" / "r1" / "commands"
    (commands / "check").mkdir(parents=True)
    (commands / "check" / "stdout").write_text("x" * OUTPUT_TAIL + "value.txt holds 3\n")
    (commands / "check" / "stderr").write_text("")
    (commands / "check" / "report.xml").write_text("<testsuite/>")  # not a stream: not kept
    judgement = RepetitionJudgement(
        index=1,
        commands={
            "check": {"exit_status": 1, "timed_out": False, "passed": False,
                      "sandbox_error": None, "report": {"failed": ["value is 2"]}},
            "lint": {"exit_status": 0, "timed_out": False, "passed": True,
                     "sandbox_error": None, "report": None},
        },
        oracle=None,
        verdicts={"T1": Verdict("fail", "check: failed tests: value is 2"),
                  "T2": Verdict("pass", "lint exited 0")},
    )  # fmt: skip
    cand = CandidateInfo(kind="patch", name="patch.diff", sha256="ab" * 32,
                         files_changed=("value.txt",), outside_editable=(),
                         protected_changed=())  # fmt: skip
    judged = TaskEvaluation(task={"name": "shell"}, candidate=cand, repetitions=[judgement])
    judged.conclude(("T1", "T2"))
    base = rep(1, "failed", judged.failed(("T1", "T2")))
    return dataclasses.replace(base, reason="T1: fail: check: failed tests", evaluation=judged)


def test_a_fixture_task_campaign_s_package(tmp_path: Path) -> None:
    signer = Signer.ephemeral()
    task = load_fixture_task(ASSETS / "tasks" / "shell" / "task.yaml")
    package = write_package(tmp_path / "package", rep=failed_task_run(tmp_path), rep_dir=tmp_path,
                            task=task, signer=signer, judged=JUDGED)  # fmt: skip
    names = sorted(str(p.relative_to(package)) for p in package.rglob("*") if p.is_file())
    assert names == [
        "README.md", "SHA256SUMS", "SHA256SUMS.sig", "TASK.md", "constraints.json", "lab.pub",
        "patches/final.patch", "stop.json", "verification.json",
        "verification/r1/check/stderr", "verification/r1/check/stdout",
    ]  # fmt: skip
    verify_detached((package / "SHA256SUMS").read_bytes(),
                    (package / "SHA256SUMS.sig").read_text(), signer.public_key,
                    what="the package's SHA256SUMS")  # fmt: skip
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=package, capture_output=True)
    assert checked.returncode == 0, checked.stdout
    assert (package / "TASK.md").read_text() == task.text
    constraints = json.loads((package / "constraints.json").read_text())
    assert constraints["clauses_deciding_success"] == ["T1", "T2"]
    assert constraints["task"]["requirements"]["T1"] == "check.sh passes (value.txt holds 2)"
    assert constraints["commands_deciding_success"] == [["sh", "check.sh"], ["sh", "lint.sh"]]
    assert constraints["judged"] == JUDGED and "native/" not in constraints["judged"]
    final = json.loads((package / "verification.json").read_text())["final"]
    assert final["failed_clauses"] == {"T1": "fail: check: failed tests: value is 2"}
    [judged] = final["judged"]
    assert judged["commands"]["check"] == {
        "exit_status": 1, "timed_out": False, "passed": False, "sandbox_error": None,
        "failed_tests": ["value is 2"], "output": "verification/r1/check/",
    }  # fmt: skip
    assert judged["verdicts"]["T1"]["observed"] == "fail"
    assert judged["verdicts"]["T2"]["observed"] == "pass"
    stdout = (package / "verification" / "r1" / "check" / "stdout").read_bytes()
    assert len(stdout) == OUTPUT_TAIL and stdout.endswith(b"value.txt holds 3\n")  # its end
    assert (package / "patches" / "final.patch").read_text() == "-1\n+3\n"
    assert json.loads((package / "stop.json").read_text())["outcome"] == "failed"


def test_a_backup_task_s_package_says_native_is_judged(tmp_path: Path) -> None:
    package = write_package(tmp_path / "p", rep=rep(1, "failed"), rep_dir=tmp_path,
                            task=load_task(TASK), signer=None)  # fmt: skip
    constraints = json.loads((package / "constraints.json").read_text())
    assert constraints["judged"] == NATIVE_JUDGED
    assert json.loads((package / "verification.json").read_text())["final"]["judged"] == []
    assert not (package / "verification").exists()


def test_a_fixture_task_campaign_takes_escalate_cmd_and_refuses_an_empty_one() -> None:
    task = load_fixture_task(ASSETS / "tasks" / "shell" / "task.yaml")
    request = CampaignRequest(task_path=task.path, agent_cmd="sh a.sh", escalate_cmd="sh b.sh")
    assert _settle(request, task) == (1, 1, 30.0)
    with pytest.raises(UsageError, match="--escalate-cmd is empty"):
        _settle(dataclasses.replace(request, escalate_cmd="  "), task)
