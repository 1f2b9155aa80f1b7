"""The agent watched (issue 23) in the lab image, as a new user would run it
(``invoke lab.campaign``): the model stub listens on the host's loopback (the container
shares the host's network), the agent gets a network of its own whose only way out is the
lab's forwarder to that endpoint, and one campaign of two repetitions shows A1 pass for the
agent that talks only to its model and A1 fail for the one that also tries elsewhere; a
second campaign's agent plateaus, is stopped, and a second agent fixes the task from the
signed escalation package. Needs Docker and root (the image is built by the nox ``e2e``
session first)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from lab.sandbox.user import default_name
from tests.assets.model_stub import ModelStub
from tests.e2e.test_lab_run import ARTIFACTS, invoke, newest, verify_everywhere

AGENTS = "tests/assets/agents"
TASK = "tests/assets/campaigns/quick-speedup.yaml"


def _nothing_outlives(pattern: str) -> None:
    left = subprocess.run(
        ["pgrep", "-u", default_name(), "-f", pattern], capture_output=True, text=True
    )
    # 1: nothing matched on the host (the container's processes are the host's too)
    assert left.returncode == 1 and left.stdout.strip() == "", left


def test_a1_pass_and_fail_with_the_model_stub_in_the_image(tmp_path: Path) -> None:
    before = set(ARTIFACTS.glob("*.tar.gz"))
    with ModelStub() as stub:
        done = invoke(
            "lab.campaign",
            "--task", TASK,
            "--agent-cmd", f"python3 {AGENTS}/model-agent.py {stub.address} alternate",
            "--agent-network", f"model={stub.address}",
            "--repetitions", "2", "--budget", "60", "--require", "1",
            timeout=3000,
        )  # fmt: skip
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-4000:]
        requests = stub.requests
    archive = newest("campaign", before)
    results = verify_everywhere(archive, tmp_path)
    assert results["environment"]["in_container"] is True
    rows = results["campaign"]["repetitions"]
    assert [r["outcome"] for r in rows] == ["met", "met"]
    assert [r["agent_verdicts"]["A1"] for r in rows] == ["pass", "fail"]
    assert sum(r["model_requests"] for r in rows) == requests == 4
    run_dir = tmp_path / archive.name.removesuffix(".tar.gz")
    egress = json.loads((run_dir / "repetitions" / "r2" / "repetition.json").read_text())
    port = int(stub.address.rsplit(":", 1)[1])
    assert f"tcp 127.0.0.1:{port + 1}" in egress["egress"]["disallowed"]
    assert "connect 192.0.2.1:80" in egress["egress"]["disallowed"]  # the connect trace
    assert "socket raw" in egress["egress"]["disallowed"]  # refused, and seen asking
    interval = results["campaign"].get("interval")
    assert interval is not None and 0 <= interval[0] <= interval[1] <= 1, results["campaign"]
    _nothing_outlives("sleep 313")


def test_a_plateau_escalated_and_fixed_in_the_image(tmp_path: Path) -> None:
    before = set(ARTIFACTS.glob("*.tar.gz"))
    done = invoke(
        "lab.campaign",
        "--task", TASK,
        "--agent-cmd", f"sh {AGENTS}/plateau-forever.sh {AGENTS}/skip-digest.sh",
        "--escalate-cmd", f"sh {AGENTS}/escalated-fix.sh",
        "--repetitions", "1", "--budget", "120", "--stop-on-plateau", "2", "--require", "1",
        timeout=3000,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-4000:]  # --require counts the first agent's runs
    archive = newest("campaign", before)
    results = verify_everywhere(archive, tmp_path)
    assert results["environment"]["in_container"] is True
    [row] = results["campaign"]["repetitions"]
    assert row["outcome"] == "plateaued", row
    run_dir = tmp_path / archive.name.removesuffix(".tar.gz")
    record = json.loads((run_dir / "repetitions" / "r1" / "repetition.json").read_text())
    assert record["escalated"]["outcome"] == "met", record.get("escalated")
    assert results["campaign"]["escalation"]["verified_successes"] == 1
    _nothing_outlives("plateau-forever")
