"""--escalate-cmd's evidence package (what a second agent is given, checksummed and signed)
and the record of an escalated repetition: its --json row, the tiers, the report."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from lab.campaign.escalate import needs_escalation, write_package
from lab.campaign.task import load_task
from lab.evidence.signing import Signer, verify_detached
from lab.model.campaign import RepetitionRecord
from lab.model.trajectory import JudgedSnapshot, mark
from lab.reports.campaign import campaign_lines, campaign_sections
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
    assert tiers["tiers"]["1"] == {"runs": 2, "met": 1, "agent_s": 3.0, "tokens": None}
    assert tiers["tiers"]["2"] == {"runs": 1, "met": 1, "agent_s": 1.0, "tokens": None}
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


def test_a_fixture_task_refuses_escalation_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab import _cli

    task = Path(__file__).resolve().parents[3] / "campaigns" / "safe-store" / "task.yaml"
    code = _cli.main(["campaign", "--task", str(task), "--agent-cmd", "true", "--local",
                      "--escalate-cmd", "true", "--out", str(tmp_path)])  # fmt: skip
    assert code == 2
    assert "--escalate-cmd is not available for a fixture task" in capsys.readouterr().err
