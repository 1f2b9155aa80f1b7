"""Real strace and bpftrace runs on real programs, through the collectors' own wrap/collect.

Two clients: ``traced_program`` (tests/assets/bpftrace/traced_program.c, built here), whose
reads, sends and function entries are known exactly, and the seeded native client
(``native/backup-client``, built by the ``client`` fixture) with its article figures.
A loopback receiver started by each test answers HAVE (YES once it holds the digest) and
PUT (reads the payload, checks its SHA-256, OK).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.collectors.base import CollectorOutput, InvocationContext, ProcessCollector
from lab.collectors.bpftrace import BpftraceCollector
from lab.collectors.strace import StraceCollector
from lab.host import procs
from lab.run.receiver import Receiver
from tests.conftest import ASSETS, require

pytestmark = pytest.mark.integration

SMALL = 200_000
NATIVE_SIZE = 524_288  # the brief's default source size
HAVE_LINE = len("HAVE ") + 64 + 1  # plus the size digits and "\n"


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    """The lab's own receiver (wire protocol v1), in a temporary store."""
    with Receiver.serving(tmp_path / "store", tmp_path / "receiver.jsonl") as rx:
        yield rx


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
def strace_ready() -> None:
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)


@pytest.fixture
def bpftrace_ready() -> None:
    status = BpftraceCollector.probe()
    require("bpftrace", status.available, status.reason)


def write_source(path: Path, size: int) -> Path:
    block = hashlib.sha256(b"lab").digest() * 2048
    path.write_bytes((block * (size // len(block) + 1))[:size])
    return path


def invoke(
    tracer: ProcessCollector,
    run_dir: Path,
    index: int,
    client: Path,
    source: Path,
    rx: Receiver,
    extra: list[str],
) -> tuple[CollectorOutput, procs.Completed, InvocationContext]:
    """What the runner does for one invocation: wrap, run through lab.procs, collect."""
    out = run_dir / f"inv{index}"
    out.mkdir(parents=True)
    ctx = InvocationContext(
        run_dir=run_dir,
        out_dir=out,
        client_path=client,
        source_path=source,
        source_size=source.stat().st_size,
        receiver_port=rx.port,
        decoy_port=0,
        invocation=index,
        log=procs.CommandLog(run_dir / "commands.jsonl", root=run_dir),
        timeout_s=120,
    )
    argv = [str(client), "--source", str(source), "--receiver", f"127.0.0.1:{rx.port}", *extra]
    done = procs.run(
        tracer.wrap(argv, ctx),
        purpose=f"client invocation {index} ({tracer.name})",
        log=ctx.log,
        stdout=out / "client.stdout",
        stderr=out / "client.stderr",
        timeout=ctx.timeout_s,
        accept=None,
        cwd=out,
    )
    return tracer.collect(ctx, done), done, ctx


def events(ctx: InvocationContext) -> list[dict[str, object]]:
    lines = (ctx.out_dir / "client.stdout").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_strace_counts_reads_sends_and_destinations(
    strace_ready: None, programs: dict[str, Path], receiver: Receiver, tmp_path: Path
) -> None:
    source = write_source(tmp_path / "source.bin", SMALL)
    out, done, ctx = invoke(
        StraceCollector(),
        tmp_path / "run",
        1,
        programs["full"],
        source,
        receiver,
        ["--hashes", "3", "--threads", "2", "--udp", "47090", "--exit", "3"],
    )
    assert out.error is None, out.error
    assert done.exit_status == 3  # strace passes the client's status through
    assert out.summary is not None
    assert out.summary["exit_status"] == 3
    assert out.summary["source_bytes_read"] == 5 * SMALL  # 3 passes + 2 reader threads
    assert out.summary["source_reads"] == 5 * (SMALL // 65536 + 2)
    assert out.summary["connects"] == 1
    assert out.summary["destinations"] == sorted(["127.0.0.1:47090", f"127.0.0.1:{receiver.port}"])
    assert out.summary["sent_bytes"] == 5 + HAVE_LINE + len(str(SMALL)) + 1
    assert out.artifacts == ["inv1/strace.txt"]
    assert events(ctx)[-1]["status"] == "ok"  # the client's stdout is still its own


def test_bpftrace_counts_function_entries_and_exit_status(
    bpftrace_ready: None, programs: dict[str, Path], receiver: Receiver, tmp_path: Path
) -> None:
    source = write_source(tmp_path / "source.bin", SMALL)
    out, done, ctx = invoke(
        BpftraceCollector(),
        tmp_path / "run",
        1,
        programs["full"],
        source,
        receiver,
        ["--hashes", "4", "--udp", "47091", "--exit", "3"],
    )
    assert out.error is None, out.error
    assert done.exit_status == 0  # bpftrace's own status ...
    assert out.client_exit_status == 3  # ... and the client's, from exit_group
    s = out.summary
    assert s is not None
    assert (s["hash_calls"], s["busy_wait_calls"], s["send_payload_calls"]) == (4, 1, 1)
    assert s["maps"]["@hash_calls"] == "4"
    assert s["connects"] == 1
    assert s["destinations"] == sorted(["127.0.0.1:47091", f"127.0.0.1:{receiver.port}"])
    assert s["sent_bytes"] == 5 + HAVE_LINE + len(str(SMALL)) + 1
    assert s["read_bytes"] >= 4 * SMALL
    assert s["absent_symbols"] == [] and s["lost_events"] == 0
    assert sorted(out.artifacts) == [
        "inv1/bpftrace.bt",
        "inv1/bpftrace.symbols.txt",
        "inv1/bpftrace.txt",
    ]
    assert events(ctx)[-1]["status"] == "ok"


def test_bpftrace_reports_a_missing_function_as_absent(
    bpftrace_ready: None, programs: dict[str, Path], receiver: Receiver, tmp_path: Path
) -> None:
    source = write_source(tmp_path / "source.bin", SMALL)
    out, _, _ = invoke(
        BpftraceCollector(),
        tmp_path / "run",
        1,
        programs["no_hash_file"],
        source,
        receiver,
        ["--hashes", "2"],
    )
    assert out.error is None, out.error
    s = out.summary
    assert s is not None
    assert "hash_calls" not in s and s["absent_symbols"] == ["hash_file"]
    assert "@hash_calls" not in s["maps"]
    assert s["busy_wait_calls"] == 1 and s["connects"] == 1
    assert out.client_exit_status == 0


@pytest.mark.parametrize(
    ("behavior", "hashes", "connects"), [("hash-storm", 256, (2, 1)), ("baseline", 1, (2, 1))]
)
def test_native_client_under_strace(
    strace_ready: None,
    client: Path,
    receiver: Receiver,
    tmp_path: Path,
    behavior: str,
    hashes: int,
    connects: tuple[int, int],
) -> None:
    source = write_source(tmp_path / "source.bin", NATIVE_SIZE)
    seen = []
    for index in (1, 2):
        out, done, _ = invoke(
            StraceCollector(),
            tmp_path / "run",
            index,
            client,
            source,
            receiver,
            ["--behavior", behavior],
        )
        assert out.error is None, out.error
        assert out.summary is not None and done.exit_status == 0
        assert out.summary["destinations"] == [f"127.0.0.1:{receiver.port}"]
        seen.append(out.summary)
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
    receiver: Receiver,
    tmp_path: Path,
    behavior: str,
    hashes: int,
    connects: tuple[int, int],
) -> None:
    source = write_source(tmp_path / "source.bin", NATIVE_SIZE)
    seen = []
    for index in (1, 2):
        out, _, _ = invoke(
            BpftraceCollector(),
            tmp_path / "run",
            index,
            client,
            source,
            receiver,
            ["--behavior", behavior],
        )
        assert out.error is None, out.error
        assert out.summary is not None and out.client_exit_status == 0
        assert out.summary["hash_calls"] == hashes
        assert out.summary["destinations"] == [f"127.0.0.1:{receiver.port}"]
        seen.append(out.summary)
    assert (seen[0]["connects"], seen[1]["connects"]) == connects
    assert (seen[0]["send_payload_calls"], seen[1]["send_payload_calls"]) == (1, 0)
    assert seen[1]["sent_bytes"] == HAVE_LINE + len(str(NATIVE_SIZE)) + 1
    assert seen[1]["read_bytes"] >= hashes * NATIVE_SIZE
