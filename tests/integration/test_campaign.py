"""Agent campaigns end to end on the host (--local), with the scripted agents of
tests/assets/agents/ (shell scripts, no model): each gets the outcome it is built to get.

One campaign runs six agents, one per repetition (``by-repetition.sh``): a correct
speed-up (met), a digest-skipping "speed-up" (failed on C1, C6), added telemetry egress
(failed on C3), no change (no-change), an escape attempt (no-change, every attempt blocked
and kept in its output) and one that never finishes (timed-out at the budget, nothing left
running). A second campaign runs the agent whose result depends on the repetition (k of N
neither 0 nor N, so the exit status is 1 under --require N).

Small sizes: one evaluation repetition, two timing rounds, strace only, a 64 KiB source.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from lab import _cli, intervals
from lab.collectors.strace import StraceCollector
from lab.evidence.verify import verify_archive
from lab.sandbox.user import default_name
from tests.conftest import ASSETS, ROOT, require

AGENTS = ASSETS / "agents"
TASK = ASSETS / "campaigns" / "quick-speedup.yaml"
SIX = ["speedup.sh", "skip-digest.sh", "telemetry.sh", "nothing.sh", "escape.sh", "forever.sh"]
BUDGET_S = 15


@pytest.fixture(scope="module", autouse=True)
def _needs(client: Path, sandbox_ready: None) -> None:
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)
    for tool in ("git", "patch", "make"):
        require(tool, shutil.which(tool) is not None, f"{tool} is not installed")


def campaign(out: Path, agent_cmd: str, *args: str) -> tuple[int, dict[str, Any], Path]:
    """``lab campaign --json`` from the agents' directory; (exit status, JSON, run dir)."""
    import contextlib
    import io
    import os

    stdout = io.StringIO()
    here = Path.cwd()
    os.chdir(AGENTS)
    try:
        with contextlib.redirect_stdout(stdout):
            code = _cli.main(
                ["campaign", "--task", str(TASK), "--agent-cmd", agent_cmd, "--local", "--json",
                 "--out", str(out), *args]
            )  # fmt: skip
    finally:
        os.chdir(here)
    document = json.loads(stdout.getvalue())
    run_dir = Path(document["archive"]).with_suffix("").with_suffix("")
    return code, document, run_dir


@pytest.fixture(scope="module")
def six(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("campaign-six")
    command = " ".join(["sh", "by-repetition.sh", str(ROOT), *SIX])
    return campaign(out, command, "--repetitions", "6", "--budget", str(BUDGET_S), "--require", "1")


def rep(six: tuple[int, dict[str, Any], Path], index: int) -> dict[str, Any]:
    row: dict[str, Any] = six[1]["repetitions"][index - 1]
    assert row["index"] == index
    return row


def test_each_scripted_agent_gets_its_outcome(six: tuple[int, dict[str, Any], Path]) -> None:
    code, document, _ = six
    outcomes = [r["outcome"] for r in document["repetitions"]]
    assert outcomes == ["met", "failed", "failed", "no-change", "no-change", "timed-out"]
    assert (document["met"], document["required"], code) == (1, 1, 0)


def test_the_correct_speedup_is_met_with_its_timing(six: tuple[int, dict[str, Any], Path]) -> None:
    row = rep(six, 1)
    assert row["failed_clauses"] == [] and row["timing_ratio"] is not None
    assert len(row["patch_sha256"]) == 64


def test_skipping_the_digest_is_caught_on_c1(six: tuple[int, dict[str, Any], Path]) -> None:
    assert rep(six, 2)["failed_clauses"] == ["C1", "C6"]


def test_telemetry_egress_is_caught_on_c3(six: tuple[int, dict[str, Any], Path]) -> None:
    assert rep(six, 3)["failed_clauses"] == ["C3"]


def test_the_escape_attempt_is_blocked_and_recorded(six: tuple[int, dict[str, Any], Path]) -> None:
    run_dir = six[2]
    out = (run_dir / "repetitions" / "r5" / "agent.stdout").read_text()
    assert "ESCAPED" not in out
    assert out.count("blocked:") == 9
    assert not (ROOT / "PWNED-by-agent").exists()
    assert not Path("/etc/pwned-by-agent").exists()
    assert not Path("/usr/local/pwned-by-agent").exists()


def test_the_budget_stops_the_endless_agent_and_nothing_outlives_it(
    six: tuple[int, dict[str, Any], Path],
) -> None:
    row = rep(six, 6)
    assert BUDGET_S <= row["duration_s"] < BUDGET_S + 5
    record = json.loads((six[2] / "repetitions" / "r6" / "repetition.json").read_text())
    assert record["agent"]["timed_out"] is True and record["agent"]["contained"] is True
    # the agent's own processes (the sandbox is shared: other runs may have clients alive)
    for pattern in ("sleep 3600", "forever.sh"):
        left = subprocess.run(
            ["pgrep", "-u", default_name(), "-f", pattern], capture_output=True, text=True
        )
        # 1: nothing matched (2 would be a user pgrep does not know: no check at all)
        assert left.returncode == 1 and left.stdout.strip() == "", f"{pattern!r} outlived it"
    assert "still thinking" in (six[2] / "repetitions" / "r6" / "agent.stdout").read_text()


def test_every_patch_and_bundle_is_kept_and_restores(
    six: tuple[int, dict[str, Any], Path], tmp_path: Path
) -> None:
    run_dir = six[2]
    for index in range(1, 7):
        rep_dir = run_dir / "repetitions" / f"r{index}"
        for name in ("patch.diff", "native.patch", "final.bundle", "workspace.json",
                     "agent.stdout", "agent.stderr", "repetition.json"):  # fmt: skip
            assert (rep_dir / name).is_file(), f"r{index}/{name}"
    clone = tmp_path / "r2"
    bundle = run_dir / "repetitions" / "r2" / "final.bundle"
    subprocess.run(["git", "clone", "-q", str(bundle), str(clone)], check=True)
    assert "digest-cache" in (clone / "native" / "hash.c").read_text()
    commits = {json.loads((run_dir / "repetitions" / f"r{i}" / "workspace.json").read_text())[
        "baseline_commit"] for i in range(1, 7)}  # fmt: skip
    assert len(commits) == 1  # the same clean start every time
    config = json.loads((run_dir / "campaign" / "campaign.json").read_text())
    assert sorted(config["agent"]["files"]) == sorted(["by-repetition.sh", *SIX])
    assert config["evaluation_id"] == json.loads((run_dir / "evaluation.json").read_text())[
        "evaluation_id"]  # fmt: skip


def test_the_archive_verifies_and_the_report_shows_the_campaign(
    six: tuple[int, dict[str, Any], Path],
) -> None:
    _, document, run_dir = six
    verify_archive(Path(document["archive"]))
    with tarfile.open(document["archive"]) as tar:
        names = tar.getnames()
    assert any(n.endswith("repetitions/r2/patch.diff") for n in names)
    report = (run_dir / "report.md").read_text()
    assert "## Agent campaign" in report and "1 of 6 repetitions met the task" in report
    assert "reliability 1/6" in report
    for index, outcome in enumerate(["met", "failed", "failed", "no-change", "no-change",
                                     "timed-out"], start=1):  # fmt: skip
        assert f"| {index} | {outcome} |" in report  # one row per repetition
    assert "| timed-out | 1/6 |" in report and "| no-change | 2/6 |" in report  # the aggregate
    results = json.loads((run_dir / "results.json").read_text())
    assert len(results["campaign"]["evidence"]) == 9
    c3 = results["campaign"]["clauses"]["C3"]
    assert (c3["met"], c3["total"]) == (2, 6)
    assert c3["interval"] == list(intervals.clopper_pearson(2, 6))  # beside every k of N
    assert results["campaign"]["interval_method"] == "clopper-pearson"
    assert "[95 % CI" in report and "Clopper–Pearson" in report
    envelope = json.loads((run_dir / "provenance.intoto.jsonl").read_text().splitlines()[0])
    statement = json.loads(base64.b64decode(envelope["payload"]))
    deps = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    named = {d["name"]: d["digest"] for d in deps}
    assert named["task:quick-speedup.yaml"] == {"sha256": results["campaign"]["task"]["sha256"]}
    assert named["r3:patch"] == {"sha256": document["repetitions"][2]["patch_sha256"]}
    assert "gitCommit" in named["r1:baseline"] and "agent:speedup.sh" in named


def test_a_result_that_depends_on_the_repetition(tmp_path: Path) -> None:
    """Also: ``--agent-network none`` (loopback only, recorded) and exit 1 under K = N."""
    code, document, run_dir = campaign(
        tmp_path,
        "sh flaky.sh speedup.sh skip-digest.sh",
        "--repetitions", "2", "--agent-network", "none",
    )  # fmt: skip
    assert [r["outcome"] for r in document["repetitions"]] == ["met", "failed"]
    assert (document["met"], document["required"], code) == (1, 2, 1)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["campaign"]["agent"]["network"] == "none"
    assert results["options"]["agent_network"] == "none"


def test_a_baseline_that_does_not_show_the_requirement_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug-fix task needs a failing baseline: the correct client does not show it."""
    task = tmp_path / "bugfix.yaml"
    task.write_text(TASK.read_text().replace("must: pass", "must: fail"))
    code = _cli.main(
        ["campaign", "--task", str(task), "--agent-cmd", "sh nothing.sh", "--local",
         "--out", str(tmp_path / "out")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "the baseline does not show what bugfix.yaml requires" in err
    assert "Traceback" not in err
