"""``invoke lab.campaign --task campaigns/safe-store/task.yaml`` for real, in the lab image
(its Go toolchain, Debian's golang-go): the fixture task's directory mounted read-only, the
failing baseline and the calibration run there, three repetitions of the scripted agent
that fixes Store.Write, the archive verified by our verifier and the standard tools, its
report in three views. Needs Docker and root (the image is built by the nox ``e2e``
session first)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_lab_run import ARTIFACTS, invoke, newest, verify_everywhere

TASK = "campaigns/safe-store/task.yaml"
AGENT = "sh tests/assets/agents/safestore-fix.sh"


def test_invoke_lab_campaign_on_the_safe_store_task_in_the_image(tmp_path: Path) -> None:
    before = set(ARTIFACTS.glob("*.tar.gz"))
    done = invoke("lab.campaign", "--task", TASK, "--agent-cmd", AGENT, "--repetitions", "3",
                  timeout=3000)  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    archive = newest("campaign", before)
    results = verify_everywhere(archive, tmp_path)
    assert results["environment"]["in_container"] is True
    campaign = results["campaign"]
    assert [r["outcome"] for r in campaign["repetitions"]] == ["met", "met", "met"]
    assert campaign["baseline"]["status"] == "fail"
    assert (results["calibration"]["met"], results["calibration"]["total"]) == (5, 5)
    verdicts = campaign["repetitions"][0]["evaluation"]["repetitions"][0]["verdicts"]
    assert verdicts["S3"]["observed"] == "pass" and "strace -f -yy" in verdicts["S3"]["reason"]
    run_dir = tmp_path / archive.name.removesuffix(".tar.gz")
    for name in ("report.md", "report.pdf", "report.html"):
        assert (run_dir / name).stat().st_size > 0, name
    assert "The nine evidence items" in (run_dir / "report.md").read_text()
