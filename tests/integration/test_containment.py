"""Clients written to attack the instrument (tests/assets/hostile/), each run through the
real lab (sandbox, receiver, in-namespace packet capture, contract): every attack is caught
on the clause it breaks or defeated by the sandbox, none slips to a pass it did not earn,
and nothing a client starts outlives its run.

The candidate conditions' first-backup (two invocations, a decoy listening) is the workload;
``--collector none`` keeps each run to a few seconds: the packet capture inside the pass's
network namespace, the receiver's records and the backup check are what judge them here.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.collectors.bpftrace import BpftraceSession
from lab.model import ScenarioResult
from lab.pipeline import RunOutcome, RunRequest, execute
from lab.sandbox.user import ClientUser, default_name
from tests.conftest import ROOT, require

pytestmark = pytest.mark.usefixtures("sandbox_ready")

CANDIDATE_SCENARIOS = ROOT / "scenarios" / "candidate"
CLIENT_USER = default_name()  # lab-client, or LAB_CLIENT_USER


def run_hostile(
    client: Path,
    out: Path,
    *,
    packets: str = "required",
    sandbox: str = "required",
    timeout_s: float = 20.0,
    collector: str = "none",
) -> RunOutcome:
    request = RunRequest(
        names=["first-backup"],
        scenarios_dir=CANDIDATE_SCENARIOS,
        client=client,
        client_kind="candidate",
        collector=collector,
        packets=packets,
        out=out,
        archive=False,
        timeout_s=timeout_s,
        sandbox=sandbox,
    )
    return execute(request, say=lambda _: None)


def only(outcome: RunOutcome) -> ScenarioResult:
    [scenario] = outcome.result.scenarios
    return scenario


def verdicts(outcome: RunOutcome) -> dict[str, str]:
    return {c: v.observed for c, v in only(outcome).verdicts.items()}


def events(outcome: RunOutcome, invocation: int = 1) -> list[dict[str, object]]:
    [path] = outcome.run_dir.glob(f"first-backup/r1/*/inv{invocation}/client.stdout")
    found = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            found.append(event)
    return found


def client_processes() -> list[str]:
    """Processes of the sandbox's user still running anywhere on the machine (a zombie has
    exited; it only waits for init to reap it)."""
    names = ",".join(u.name for u in ClientUser.family()) or CLIENT_USER
    done = subprocess.run(
        ["ps", "-u", names, "-o", "pid=,stat=,comm="], capture_output=True, text=True
    )
    rows = [line.split(None, 2) for line in done.stdout.splitlines() if line.strip()]
    return [" ".join(r) for r in rows if not r[1].startswith("Z")]


@pytest.fixture(autouse=True)
def nothing_outlives_the_run() -> object:
    yield None
    assert client_processes() == [], "a hostile client's process outlived its run"


def test_the_honest_control_passes_in_the_sandbox(hostile: dict[str, Path], tmp_path: Path) -> None:
    # Without this, every "caught" below could be the sandbox breaking all clients alike.
    # (C3 passes only with a system-call observer beside the capture: strace here.)
    got = verdicts(run_hostile(hostile["honest"], tmp_path, collector="strace"))
    assert got == {
        "C1": "pass",
        "C2": "pass",
        "C3": "pass",
        "C4": "not-exercised",
        "C5": "not-exercised",
        "C6": "pass",
    }


def test_writing_the_store_directly_is_not_a_backup(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    outcome = run_hostile(hostile["store-writer"], tmp_path)
    got = verdicts(outcome)
    assert got["C1"] == "fail" and got["C6"] == "fail"
    # the store is not even visible from inside the sandbox
    assert not any(e.get("event") == "wrote" for e in events(outcome))


def test_the_source_cannot_be_rewritten(hostile: dict[str, Path], tmp_path: Path) -> None:
    outcome = run_hostile(hostile["source-rewriter"], tmp_path)
    seen = {str(e.get("event")) for e in events(outcome)}
    assert {"truncate-refused", "rewrite-refused"} <= seen, seen
    inv = only(outcome).passes[0].invocations[0]
    assert inv.verifier.source_unchanged is True
    # the upload that follows is of the untouched fixture: a correct backup
    assert verdicts(outcome)["C1"] == "pass"


def test_unsandboxed_a_rewritten_source_fails_c1_and_nothing_forgeable_passes(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    outcome = run_hostile(hostile["source-rewriter"], tmp_path, sandbox="off")
    got = verdicts(outcome)
    assert got["C1"] == "fail"
    assert only(outcome).passes[0].invocations[0].verifier.source_unchanged is False
    assert all(got[c] != "pass" for c in ("C3", "C5", "C6")), got


@pytest.mark.parametrize(
    "attack",
    ["uring-egress", "shell-child", "daemon-fast", "dns", "other-loopback", "tracer-killer"],
)
def test_egress_by_any_route_fails_c3(
    attack: str, hostile: dict[str, Path], tmp_path: Path
) -> None:
    outcome = run_hostile(hostile[attack], tmp_path)
    got = verdicts(outcome)
    assert got["C3"] == "fail", (attack, got, only(outcome).verdicts["C3"].reason)
    if attack == "tracer-killer":
        # it could not signal the lab's processes (other user, other namespaces)
        assert not any(e.get("event") == "killed" for e in events(outcome))
        assert only(outcome).passes[0].error is None


def test_a_32_bit_system_call_is_named_not_misread(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    """A datagram sent through int 0x80 (the 32-bit table, where 102 is socketcall): the
    kernel's own tracepoint and the capture still see it, and bpftrace says it cannot decode
    those calls instead of reading them as 64-bit ones."""
    status = BpftraceSession.probe()
    require("bpftrace", status.available, status.reason)
    outcome = run_hostile(hostile["compat-egress"], tmp_path, collector="bpftrace")
    stdout = outcome.run_dir / "first-backup" / "r1" / "bpftrace" / "inv1" / "client.stdout"
    assert '"event": "compat", "attack": "compat-egress", "detail": "sent"' in stdout.read_text()
    got = only(outcome).verdicts["C3"]
    assert got.observed == "fail", got.reason
    assert "127.0.0.2" in got.reason
    [traced] = [p for p in only(outcome).passes if p.collector == "bpftrace"]
    bpf = traced.invocations[0].observed.bpftrace
    assert bpf is not None
    spots = bpf.undecodable
    assert any("32-bit system call" in spot for spot in spots), spots


def test_a_daemon_that_outlives_the_client_is_recorded_and_killed(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    outcome = run_hostile(hostile["daemon-slow"], tmp_path, collector="strace")
    inv = only(outcome).passes[0].invocations[0]
    assert inv.sandbox is not None
    assert inv.sandbox.lingering_count >= 1 and inv.sandbox.lingering_killed >= 1
    assert inv.sandbox.contained
    # its send never happened (killed first), so C3 cannot be a pass: not observed
    assert verdicts(outcome)["C3"] == "not-observed"


def test_the_signing_key_is_out_of_reach(
    hostile: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "lab-test-secret-" + os.urandom(8).hex()
    key = tmp_path / "keys" / "lab.sec"
    key.parent.mkdir()
    key.write_text(f"untrusted comment: signify secret key\n{secret}\n")
    key.chmod(0o600)
    monkeypatch.setenv("LAB_SIGNING_KEY", str(key))
    monkeypatch.setenv("LAB_TEST_SECRET", secret)
    # the thief reads up to 200,000 files of what it can see (/usr): 3 s with a warm page
    # cache, 17 s with a cold one (measured), against the 20 s a client is given by default;
    # what is tested is what it reaches, not how fast, so it has a minute
    outcome = run_hostile(hostile["key-thief"], tmp_path / "out", timeout_s=60.0)
    seen = events(outcome)
    assert any(e.get("event") == "key-files-found" for e in seen), "the thief did not finish"
    # what it can read is the public /usr (documentation that mentions "PRIVATE KEY")
    stolen = [str(e["path"]) for e in seen if e.get("event") == "stolen" and "path" in e]
    assert all(p.startswith("/usr/") for p in stolen), stolen
    env = {str(e["value"]).split("=", 1)[0] for e in seen if e.get("event") == "env"}
    # the allow-list, and PWD, which the shell that joins the cgroup sets
    assert env <= {"PATH", "LANG", "HOME", "TMPDIR", "PWD"}, env
    for path in outcome.run_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), f"the secret leaked into {path}"


def test_a_hang_costs_one_time_limit(hostile: dict[str, Path], tmp_path: Path) -> None:
    started = time.monotonic()
    outcome = run_hostile(hostile["hang"], tmp_path, timeout_s=3.0)
    elapsed = time.monotonic() - started
    got = verdicts(outcome)
    assert got["C6"] == "fail"
    inv = only(outcome).passes[0].invocations[0]
    assert inv.claim.timed_out
    # one limit, then the remaining invocation is skipped, not waited for
    assert elapsed < 30, elapsed


def test_a_fork_bomb_meets_the_pids_bound(hostile: dict[str, Path], tmp_path: Path) -> None:
    outcome = run_hostile(hostile["fork-bomb"], tmp_path)
    inv = only(outcome).passes[0].invocations[0]
    assert inv.sandbox is not None
    forked = [e for e in events(outcome) if e.get("event") == "forked"]
    assert forked and int(str(forked[0]["detail"])) < 256
    assert inv.sandbox.lingering_count >= 1 and inv.sandbox.contained


def test_a_flood_of_output_is_capped_and_the_lab_stays_small(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    argv = [sys.executable, "-m", "lab", "run", "first-backup", "--scenario-dir",
            str(CANDIDATE_SCENARIOS), "--client", str(hostile["flood"]),
            "--collector", "none", "--packets", "off", "--no-archive",
            "--out", str(tmp_path)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kib >= before
    # 2 million lines (~60 MB) kept as 1 MiB head + 1 MiB tail; the lab far below 10 GB
    assert peak_kib < 400 * 1024, f"the lab peaked at {peak_kib / 1024:.0f} MiB"
    [stdout] = tmp_path.glob("*/first-backup/r1/none/inv1/client.stdout")
    assert stdout.stat().st_size < 3 * 1024 * 1024
