"""The second article's table on this machine: campaigns/safe-store with scripted agents
(tests/assets/agents/safestore-*.sh, no model). One campaign of one repetition with the
agent that fixes the store (capability: 1/1), then one of three with the agents that fail
as the article's runs did (EvalSymlinks on a missing parent rejecting nested writes; a run
that never converges; a lexical check missing absolute names and symlinks): 0/3. Each
campaign first checks the task (failing baseline, the five seeds calibrated).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from lab.collectors.strace import StraceCollector
from tests.conftest import ASSETS, ROOT, require
from tests.integration.test_fixture_tasks import lab, results

TASK = ROOT / "campaigns" / "safe-store" / "task.yaml"
AGENTS = ASSETS / "agents"


@pytest.fixture(scope="module", autouse=True)
def _needs(sandbox_ready: None) -> None:
    require("go", shutil.which("go") is not None, "go is not installed (apt-get install golang-go)")
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)


def campaign(tmp: Any, command: str, *args: str) -> tuple[int, dict[str, Any]]:
    return lab("campaign", "--task", str(TASK), "--agent-cmd", command, "--out", str(tmp),
               *args, cwd=AGENTS)  # fmt: skip


def test_one_run_shows_capability_and_three_show_the_reliability(tmp_path: Any) -> None:
    code, one = campaign(tmp_path, "sh safestore-fix.sh", "--repetitions", "1")
    assert code == 0 and [r["outcome"] for r in one["repetitions"]] == ["met"]
    command = "sh by-repetition.sh . safestore-evalsymlinks.sh safestore-never.sh "
    command += "safestore-lexical.sh"
    code, three = campaign(tmp_path, command, "--repetitions", "3", "--budget", "20")
    assert code == 1 and three["met"] == 0
    rows = three["repetitions"]
    assert [r["outcome"] for r in rows] == ["failed", "timed-out", "failed"]
    assert {"S1", "S4"} <= set(rows[0]["failed_clauses"])
    assert {"S1", "S3"} <= set(rows[2]["failed_clauses"])
    data = results(three)
    # the second campaign under the same --out reuses the first's calibration, verified
    first = results(one)["calibration"]
    assert (first["met"], first["total"], first["reused_from"]) == (5, 5, None)
    assert data["calibration"]["met"] == 5 and data["calibration"]["key"] == first["key"]
    assert data["calibration"]["reused_from"]["archive"] == Path(one["archive"]).name
    timed_out = data["campaign"]["repetitions"][1]
    assert timed_out["agent"]["timed_out"] and timed_out["evaluation"] is not None
