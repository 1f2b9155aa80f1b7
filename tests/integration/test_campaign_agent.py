"""The agent watched (issue 23) end to end on the host (--local): its network witnessed with
a model stub, and an agent named by an absolute path, or one that cannot start.

One campaign, two repetitions of ``model-agent.py alternate`` named by its *absolute* path
(copied into the sandbox), with ``--agent-network model=HOST:PORT`` pointing at the stub:
repetition 1 talks only to its model (A1 pass), repetition 2 also connects to another
loopback port, looks a name up and opens a raw socket (A1 fail; the raw socket is refused
by the kernel and recorded in the agent's own output). Requests and tokens read from the
forwarded stream equal what the stub answered. Nothing the agent started outlives it.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab import _cli
from lab.collectors.packets import PacketCapture
from lab.collectors.strace import StraceCollector
from lab.evidence.keys import PublicKey
from lab.evidence.signing import verify_detached
from lab.sandbox.netns import NETNS_DIR
from lab.sandbox.user import default_name
from tests.assets.model_stub import ModelStub
from tests.conftest import ASSETS, require

AGENT = (ASSETS / "agents" / "model-agent.py").resolve()
TASK = ASSETS / "campaigns" / "quick-speedup.yaml"


@pytest.fixture(scope="module", autouse=True)
def _needs(client: Path, sandbox_ready: None) -> None:
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)
    packets = PacketCapture.probe()
    require("packets", packets.available, packets.reason)


def campaign(out: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """``lab campaign --json``: (exit status, the JSON document, the human text)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = _cli.main(["campaign", "--task", str(TASK), "--local", "--json",
                          "--out", str(out), *args])  # fmt: skip
    human = stderr.getvalue()
    if "processes of the client user" in human:  # another lab run on a shared machine
        require("sandbox", False, human.strip().splitlines()[-1])
    assert stdout.getvalue(), human
    return code, json.loads(stdout.getvalue()), human


@pytest.fixture(scope="module")
def witnessed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[str, Any], Path, ModelStub, str]]:
    out = tmp_path_factory.mktemp("campaign-model")
    with ModelStub() as stub:
        code, document, human = campaign(
            out,
            "--agent-cmd", f"python3 {AGENT} {stub.address} alternate",
            "--agent-network", f"model={stub.address}",
            "--repetitions", "2", "--budget", "30", "--require", "1",
        )  # fmt: skip
        assert code == 0, human
        run_dir = Path(document["archive"]).with_suffix("").with_suffix("")
        yield document, run_dir, stub, human


def test_a1_passes_for_the_model_only_and_fails_for_the_stray(
    witnessed: tuple[dict[str, Any], Path, ModelStub, str],
) -> None:
    document, run_dir, stub, human = witnessed
    rows = document["repetitions"]
    assert [r["outcome"] for r in rows] == ["met", "met"]
    assert [r["agent_verdicts"]["A1"] for r in rows] == ["pass", "fail"]
    egress = json.loads((run_dir / "repetitions" / "r2" / "repetition.json").read_text())["egress"]
    port = int(stub.address.rsplit(":", 1)[1])
    assert f"tcp 127.0.0.1:{port + 1}" in egress["disallowed"]  # another address
    assert any(d.startswith("udp ") and d.endswith(":53") for d in egress["disallowed"])  # DNS
    # refused by the kernel before any packet existed: only the connect trace shows it
    assert "connect 192.0.2.1:80" in egress["disallowed"]
    unroutable = [c for c in egress["calls"] if c["address"] == "192.0.2.1:80"]
    assert unroutable and unroutable[0]["ret"] == -101  # ENETUNREACH
    # the raw socket: refused without CAP_NET_RAW (no packet, no connect), seen by the trace
    raw = [c for c in egress["calls"] if c["call"] == "socket"]
    assert raw and raw[0]["address"] == "raw" and raw[0]["ret"] == -1, egress["calls"]
    assert "socket raw" in egress["disallowed"]
    first = json.loads((run_dir / "repetitions" / "r1" / "repetition.json").read_text())["egress"]
    assert first["attempts"] and "went elsewhere" in first["why"]
    said = (run_dir / "repetitions" / "r2" / "agent.stdout").read_text()
    assert "stray: an unroutable address: refused" in said
    assert "stray: a raw socket: refused ([Errno 1] Operation not permitted)" in said
    assert "A1 egress fail" in human and "A1 egress pass" in human
    for rep in ("r1", "r2"):
        kept = run_dir / "repetitions" / rep / "egress"
        for name in ("capture.pcap", "connections.jsonl", "conn-1.up", "conn-1.down"):
            assert (kept / name).is_file(), f"{rep}/egress/{name}"


def test_requests_and_tokens_are_what_the_model_answered(
    witnessed: tuple[dict[str, Any], Path, ModelStub, str],
) -> None:
    document, run_dir, stub, _ = witnessed
    rows = document["repetitions"]
    assert sum(r["model_requests"] for r in rows) == stub.requests == 4
    assert sum(r["tokens"]["prompt"] for r in rows) == stub.prompt_tokens
    assert sum(r["tokens"]["completion"] for r in rows) == stub.completion_tokens
    egress = json.loads((run_dir / "repetitions" / "r1" / "repetition.json").read_text())["egress"]
    assert egress["traffic"]["readable"] == "http"
    assert [c["endpoint"] for c in egress["connections"]] == [stub.address] * 2
    assert all(c["bytes_up"] > 0 and c["bytes_down"] > 0 for c in egress["connections"])


def test_the_absolute_agent_path_was_copied_and_the_document_has_intervals(
    witnessed: tuple[dict[str, Any], Path, ModelStub, str],
) -> None:
    document, run_dir, _, _ = witnessed
    config = json.loads((run_dir / "campaign" / "campaign.json").read_text())
    assert list(config["agent"]["files"]) == ["model-agent.py"]
    assert document["interval"] == [0.1581, 1.0]  # 2 of 2, Clopper–Pearson
    assert document["interval_method"] == "clopper-pearson"
    assert document["pass_at_k"] == {"1": 1.0, "2": 1.0}


def test_every_exec_the_verification_runs_and_what_was_left(
    witnessed: tuple[dict[str, Any], Path, ModelStub, str],
) -> None:
    _, run_dir, _, human = witnessed
    record = json.loads((run_dir / "repetitions" / "r1" / "repetition.json").read_text())
    processes = record["processes"]
    assert processes["error"] is None and processes["exec_count"] >= 3
    programs = [e["argv"][0].rsplit("/", 1)[-1] for e in processes["execs"]]
    assert "make" in programs and "sleep" in programs and "cc" in programs
    assert processes["verification"] == [
        {"command": "make -C native", "runs": 1, "exit_statuses": [0]}
    ]
    # sh -c execs python3 in place (the same pid): the sh image ends without a status
    python = next(e for e in processes["execs"] if e["argv"][0].endswith("python3"))
    assert "model-agent.py" in " ".join(python["argv"])
    assert python["exit_status"] == 0 and python["end_s"] >= python["start_s"]
    left = processes["left"]
    assert {"path": "notes.txt", "type": "file", "bytes": 13} in left["home"]
    assert {"path": "scratch.txt", "type": "file", "bytes": 8} in left["tmp"]
    agent = record["agent"]
    assert agent["lingering_count"] >= 1 and agent["contained"] is True
    assert any("sleep" in " ".join(p["argv"]) for p in agent["lingering"])
    assert agent["cgroup"]["cpu_usage_s"] is not None
    assert "make -C native ran 1× (exit 0)" in human
    assert (run_dir / "repetitions" / "r1" / "processes" / "exec.txt").is_file()
    report = (run_dir / "report.md").read_text()
    assert "What the agent did" in report


def test_nothing_the_agent_started_outlives_its_repetition(
    witnessed: tuple[dict[str, Any], Path, ModelStub, str],
) -> None:
    for pattern in ("model-agent.py", "sleep 313"):
        left = subprocess.run(
            ["pgrep", "-u", default_name(), "-f", pattern], capture_output=True, text=True
        )
        # 1: none matched (2 would be a user pgrep does not know: no evidence either way)
        assert left.returncode == 1, f"{pattern!r} outlived its repetition: {left}"
    import os

    mine = [p.name for p in NETNS_DIR.glob(f"lab-{os.getpid()}-agent-*")]
    assert mine == []  # the agent's namespace (and the listeners in it) are gone


def test_an_agent_that_cannot_start_says_why_on_the_console(tmp_path: Path) -> None:
    code, document, human = campaign(
        tmp_path, "--agent-cmd", "sh /nowhere/agent.sh", "--repetitions", "1", "--budget", "20"
    )
    assert code == 1 and document["repetitions"][0]["outcome"] == "agent-crashed"
    assert "cannot open /nowhere/agent.sh" in human


def test_the_trajectory_marks_the_regression_and_the_plateau(tmp_path: Path) -> None:
    """Repetition 1 wanders (build broken, fixed, C1 regressed, fixed); repetition 2
    plateaus (three judged snapshots in a row without a new passing clause)."""
    agents = ASSETS / "agents"
    command = (
        f"sh {agents / 'by-repetition.sh'} {agents / 'skip-digest.sh'} "
        f"{agents / 'wander.sh'} {agents / 'plateau.sh'}"
    )
    code, document, human = campaign(
        tmp_path, "--agent-cmd", command, "--repetitions", "2", "--budget", "40"
    )
    assert code == 0
    assert [r["outcome"] for r in document["repetitions"]] == ["met", "met"], human
    run_dir = Path(document["archive"]).with_suffix("").with_suffix("")
    wander = json.loads((run_dir / "repetitions" / "r1" / "repetition.json").read_text())
    t = wander["trajectory"]
    statuses = [(j["status"], sorted(c for c, v in j["clauses"].items() if v == "fail"))
                for j in t["judged"]]  # fmt: skip
    assert statuses == [
        ("build-failed", []), ("judged", []), ("judged", ["C1", "C6"]), ("judged", [])
    ]  # fmt: skip
    s2, s3 = t["judged"][1]["index"], t["judged"][2]["index"]
    assert {"clause": "C1", "passed_at": s2, "failed_at": s3} in t["regressions"]
    assert t["judged"][2]["regressions"] == ["C1", "C6"]
    assert "regression: C1" in human
    plateau = json.loads((run_dir / "repetitions" / "r2" / "repetition.json").read_text())
    p = plateau["trajectory"]
    assert len(p["judged"]) == 4 and p["plateau_at"] == p["judged"][3]["index"]
    assert [j["plateau"] for j in p["judged"]] == [False, False, False, True]
    report = (run_dir / "report.md").read_text()
    assert "## Trajectories" in report or "Trajectories" in report
    assert "REGRESSION C1" in report and "plateau" in report


def test_stop_on_plateau_ends_the_repetition_as_plateaued(tmp_path: Path) -> None:
    agent = ASSETS / "agents" / "plateau-forever.sh"
    code, document, human = campaign(
        tmp_path, "--agent-cmd", f"sh {agent}", "--repetitions", "1", "--budget", "120",
        "--stop-on-plateau", "2",
    )  # fmt: skip
    row = document["repetitions"][0]
    assert row["outcome"] == "plateaued" and code == 1, human
    assert row["duration_s"] < 110  # ended by the plateau, not the budget
    run_dir = Path(document["archive"]).with_suffix("").with_suffix("")
    record = json.loads((run_dir / "repetitions" / "r1" / "repetition.json").read_text())
    assert "stopped on a plateau" in record["reason"] and "met" in record["reason"]
    judged = record["trajectory"]["judged"]
    assert record["trajectory"]["plateau_at"] is not None and judged[-1]["plateau"] is True
    left = subprocess.run(
        ["pgrep", "-u", default_name(), "-f", "plateau-forever"], capture_output=True, text=True
    )
    assert left.returncode == 1 and left.stdout.strip() == "", left  # 1: none matched


def test_a_plateau_is_escalated_and_the_second_agent_fixes_it_from_the_package(
    tmp_path: Path,
) -> None:
    """The issue's "done when" for escalation: one agent plateaus on a wrong answer (C1,
    C6 fail), the lab stops it, writes and signs the evidence package, and a second agent
    fixes the task from it in a fresh workspace; both results judged by the same gates."""
    agents = ASSETS / "agents"
    code, document, human = campaign(
        tmp_path,
        "--agent-cmd", f"sh {agents / 'plateau-forever.sh'} {agents / 'skip-digest.sh'}",
        "--escalate-cmd", f"sh {agents / 'escalated-fix.sh'}",
        "--repetitions", "1", "--budget", "120", "--stop-on-plateau", "2", "--require", "1",
    )  # fmt: skip
    row = document["repetitions"][0]
    assert row["outcome"] == "plateaued", human
    assert sorted(row["failed_clauses"]) == ["C1", "C6"]
    assert row["escalation"] == {"outcome": "met", "failed_clauses": []}, human
    assert code == 1  # --require counts the agent's own runs (tier 1): 0 of 1
    run_dir = Path(document["archive"]).with_suffix("").with_suffix("")
    rep_dir = run_dir / "repetitions" / "r1"
    package = rep_dir / "escalation-package"
    sums = (package / "SHA256SUMS").read_bytes()
    public = PublicKey.from_signify((package / "lab.pub").read_text(), what="lab.pub")
    verify_detached(sums, (package / "SHA256SUMS.sig").read_text(), public, what="SHA256SUMS")
    assert (
        public.key_id
        == PublicKey.from_signify((run_dir / "lab.pub").read_text(), what="pub").key_id
    )
    stop = json.loads((package / "stop.json").read_text())
    assert stop["outcome"] == "plateaued" and "stopped on a plateau" in stop["reason"]
    verification = json.loads((package / "verification.json").read_text())
    assert verification["snapshots"] and all(
        s["failed_clauses"] == ["C1", "C6"] for s in verification["snapshots"]
    )
    assert (package / "patches" / "final.patch").is_file()
    assert (package / "patches" / f"s{verification['snapshots'][0]['snapshot']}.patch").is_file()
    second = (rep_dir / "escalation" / "agent.stdout").read_text()
    assert "first run: plateaued" in second and "failed in snapshots" in second
    record = json.loads((rep_dir / "repetition.json").read_text())
    assert record["escalated"]["outcome"] == "met"
    assert (rep_dir / "escalation" / "judged").is_dir()
    results = json.loads((run_dir / "results.json").read_text())["campaign"]
    tiers = results["escalation"]["tiers"]
    assert (tiers["1"]["met"], tiers["1"]["runs"], tiers["2"]["met"], tiers["2"]["runs"]) == (
        0, 1, 1, 1,
    )  # fmt: skip
    assert results["escalation"]["verified_successes"] == 1
    assert results["escalation"]["agent_s_per_success"] >= tiers["2"]["agent_s"] > 0
    assert "escalated: met" in human and "escalation cost" in human
    report = (run_dir / "report.md").read_text()
    assert "Escalation" in report and "tier 2" in report
