"""``invoke lab.campaign`` for real, in the lab image: a 3-repetition campaign with the
scripted agent whose result depends on the repetition, its output streamed, its archive
verified by our verifier and by the standard tools. Needs Docker and root (the image is
built by the nox ``e2e`` session first)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_lab_run import ARTIFACTS, invoke, newest, verify_everywhere

AGENTS = "tests/assets/agents"
TASK = "tests/assets/campaigns/quick-speedup.yaml"


def test_invoke_lab_campaign_three_repetitions_in_the_image(tmp_path: Path) -> None:
    before = set(ARTIFACTS.glob("*.tar.gz"))
    done = invoke(
        "lab.campaign",
        "--task", TASK,
        "--agent-cmd", f"sh {AGENTS}/flaky.sh {AGENTS}/speedup.sh {AGENTS}/skip-digest.sh",
        "--repetitions", "3",
        "--budget", "120",
        "--require", "2",
        timeout=3000,
    )  # fmt: skip
    output = done.stdout + done.stderr
    # repetitions 1 and 3 make the correct speed-up, 2 the digest-skipping one: 2 of 3
    assert done.returncode == 0, output[-4000:]
    for index in (1, 2, 3):
        assert f"[r{index}] repetition {index}:" in output  # streamed, prefixed
    archive = newest("campaign", before)
    results = verify_everywhere(archive, tmp_path)
    campaign = results["campaign"]
    assert results["environment"]["in_container"] is True
    assert [r["outcome"] for r in campaign["repetitions"]] == ["met", "failed", "met"]
    assert campaign["repetitions"][1]["failed_clauses"] == ["C1", "C6"]
    assert (campaign["met"], campaign["required"]) == (2, 2)
    assert all(len(r["patch_sha256"]) == 64 for r in campaign["repetitions"])
    assert all(r["timing_ratio"] is not None for r in campaign["repetitions"])
    run_dir = tmp_path / archive.name.removesuffix(".tar.gz")
    report = (run_dir / "report.md").read_text()
    assert "2 of 3 repetitions met the task" in report and "reliability 2/3" in report
    assert "Evidence of every agent run" in report
    for index in (1, 2, 3):
        assert (run_dir / "repetitions" / f"r{index}" / "patch.diff").stat().st_size > 0
        record = json.loads((run_dir / "repetitions" / f"r{index}" / "repetition.json").read_text())
        assert record["agent"]["exit_status"] == 0
