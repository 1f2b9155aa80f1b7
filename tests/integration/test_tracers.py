"""Real strace and bpftrace runs on real programs, in the sandbox, as the runner runs them:
strace attaches at each invocation's gate (lab.sandbox.gate), bpftrace attaches once per
pass and attributes what it sees by cgroup.

Two clients: ``traced_program`` (tests/assets/bpftrace/traced_program.c, built here), whose
reads, sends and function entries are known exactly, and the seeded native client
(``native/backup-client``, built by the ``client`` fixture) with its article figures. The
lab's receiver answers them inside the pass's network namespace.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lab.collectors.base import InvocationContext
from lab.collectors.bpftrace import BpftraceSession
from lab.collectors.strace import StraceCollector
from lab.host import procs
from tests.conftest import ASSETS, require
from tests.integration.harness import sandboxed_pass

pytestmark = pytest.mark.integration

SMALL = 200_000
NATIVE_SIZE = 524_288  # the brief's default source size
HAVE_LINE = len("HAVE ") + 64 + 1  # plus the size digits and "\n"


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    gcc = shutil.which("gcc")
    require("gcc", gcc is not None, "gcc is not installed; install the Debian package 'gcc'")
    assert gcc is not None
    out = tmp_path_factory.mktemp("programs")
    c_source = ASSETS / "bpftrace" / "traced_program.c"
    built: dict[str, Path] = {}
    for name, flags in (("full", []), ("no_hash_file", ["-DOMIT_HASH_FILE"])):
        binary = out / f"traced_program_{name}"
        procs.run(
            [gcc, "-O2", "-g", "-pthread", *flags, "-o", str(binary), str(c_source)],
            purpose="build traced_program",
        )
        built[name] = binary
    return built


@pytest.fixture
def strace_ready(sandbox_ready: None) -> None:
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)


@pytest.fixture
def bpftrace_ready(sandbox_ready: None) -> None:
    status = BpftraceSession.probe()
    require("bpftrace", status.available, status.reason)


def events(ctx: InvocationContext) -> list[dict[str, object]]:
    lines = (ctx.out_dir / "client.stdout").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_strace_counts_reads_sends_and_destinations(
    strace_ready: None, programs: dict[str, Path], tmp_path: Path
) -> None:
    with sandboxed_pass(programs["full"], tmp_path) as p:
        extra = ["--hashes", "3", "--threads", "2", "--udp", "47090", "--exit", "3"]
        out, outcome, ctx = p.invoke(1, extra, tracer=StraceCollector())
        port = p.rx.port
    assert out is not None and out.error is None, out
    assert outcome.exit_status == 3  # as bwrap reports the client's status
    assert out.summary is not None
    record = out.summary.to_dict()
    assert record["exit_status"] == 3
    assert record["source_bytes_read"] == 5 * SMALL  # 3 passes + 2 reader threads
    assert record["source_reads"] == 5 * (SMALL // 65536 + 2)
    assert record["connects"] == 1
    assert record["destinations"] == sorted(["127.0.0.1:47090", f"127.0.0.1:{port}"])
    assert record["sent_bytes"] == 5 + HAVE_LINE + len(str(SMALL)) + 1
    # the sandbox's steps after the gate (the filter's last calls, prlimit) are in the trace,
    # and not taken for the client's (the client and its two reader threads: strace counts
    # tasks); strace's own messages (it attached) are kept beside the trace
    assert 0 < record["sandbox_syscalls"] < 300 and record["processes"] == 3
    assert out.artifacts == ["pass/inv1/strace.txt", "pass/inv1/strace.stderr.txt"]
    assert events(ctx)[-1]["status"] == "ok"  # the client's stdout is still its own


def test_bpftrace_counts_function_entries_per_invocation(
    bpftrace_ready: None, programs: dict[str, Path], tmp_path: Path
) -> None:
    session = BpftraceSession()
    with sandboxed_pass(programs["full"], tmp_path, invocations=2, sessions=[session]) as p:
        _, first, _ = p.invoke(1, ["--hashes", "4", "--udp", "47091", "--exit", "3"])
        _, second, ctx = p.invoke(2, ["--hashes", "1"])
        port = p.rx.port
    assert (first.exit_status, second.exit_status) == (3, 0)
    one, two = p.outputs["bpftrace"][1], p.outputs["bpftrace"][2]
    assert one.error is None and two.error is None, (one.error, two.error)
    assert one.summary is not None and two.summary is not None
    s, t = one.summary.to_dict(), two.summary.to_dict()
    assert (s["hash_calls"], s["busy_wait_calls"], s["send_payload_calls"]) == (4, 1, 1)
    assert s["maps"]["@hash_calls"] == "4"
    assert s["connects"] == 1
    assert s["destinations"] == sorted(["127.0.0.1:47091", f"127.0.0.1:{port}"])
    assert s["sent_bytes"] == 5 + HAVE_LINE + len(str(SMALL)) + 1
    assert s["read_bytes"] >= 4 * SMALL
    assert s["absent_symbols"] == [] and s["lost_events"] == 0
    # one session, split by cgroup: the second invocation has its own counts
    assert t["hash_calls"] == 1 and t["destinations"] == [f"127.0.0.1:{port}"]
    assert "pass/bpftrace.txt" in one.artifacts and "pass/inv1/bpftrace.txt" in one.artifacts
    assert events(ctx)[-1]["status"] == "ok"


def test_bpftrace_reports_a_missing_function_as_absent(
    bpftrace_ready: None, programs: dict[str, Path], tmp_path: Path
) -> None:
    session = BpftraceSession()
    with sandboxed_pass(programs["no_hash_file"], tmp_path, sessions=[session]) as p:
        p.invoke(1, ["--hashes", "2"])
    out = p.outputs["bpftrace"][1]
    assert out.error is None, out.error
    assert out.summary is not None
    s = out.summary.to_dict()
    assert "hash_calls" not in s and s["absent_symbols"] == ["hash_file"]
    assert "@hash_calls" not in s["maps"]
    assert s["busy_wait_calls"] == 1 and s["connects"] == 1


@pytest.mark.parametrize(
    ("behavior", "hashes", "connects"), [("hash-storm", 256, (2, 1)), ("baseline", 1, (2, 1))]
)
def test_native_client_under_strace(
    strace_ready: None,
    client: Path,
    tmp_path: Path,
    behavior: str,
    hashes: int,
    connects: tuple[int, int],
) -> None:
    seen = []
    with sandboxed_pass(client, tmp_path, invocations=2, size=NATIVE_SIZE) as p:
        for index in (1, 2):
            out, outcome, _ = p.invoke(index, ["--behavior", behavior], tracer=StraceCollector())
            assert out is not None and out.error is None, out
            assert out.summary is not None and outcome.exit_status == 0
            seen.append(out.summary.to_dict())
            assert seen[-1]["destinations"] == [f"127.0.0.1:{p.rx.port}"]
    assert (seen[0]["connects"], seen[1]["connects"]) == connects
    # hashing reads the whole source `hashes` times; the first upload reads it once more
    assert seen[0]["source_bytes_read"] == (hashes + 1) * NATIVE_SIZE
    assert seen[1]["source_bytes_read"] == hashes * NATIVE_SIZE
    if behavior == "hash-storm":
        assert seen[1]["source_bytes_read"] == 134_217_728


@pytest.mark.parametrize(
    ("behavior", "hashes", "connects"), [("hash-storm", 256, (2, 1)), ("baseline", 1, (2, 1))]
)
def test_native_client_under_bpftrace(
    bpftrace_ready: None,
    client: Path,
    tmp_path: Path,
    behavior: str,
    hashes: int,
    connects: tuple[int, int],
) -> None:
    session = BpftraceSession()
    with sandboxed_pass(client, tmp_path, invocations=2, size=NATIVE_SIZE, sessions=[session]) as p:
        for index in (1, 2):
            _, outcome, _ = p.invoke(index, ["--behavior", behavior])
            assert outcome.exit_status == 0
        port = p.rx.port
    seen = []
    for index in (1, 2):
        out = p.outputs["bpftrace"][index]
        assert out.error is None, out.error
        assert out.summary is not None
        seen.append(out.summary.to_dict())
        assert seen[-1]["hash_calls"] == hashes
        assert seen[-1]["destinations"] == [f"127.0.0.1:{port}"]
    assert (seen[0]["connects"], seen[1]["connects"]) == connects
    assert (seen[0]["send_payload_calls"], seen[1]["send_payload_calls"]) == (1, 0)
    assert seen[1]["sent_bytes"] == HAVE_LINE + len(str(NATIVE_SIZE)) + 1
    assert seen[1]["read_bytes"] >= hashes * NATIVE_SIZE
