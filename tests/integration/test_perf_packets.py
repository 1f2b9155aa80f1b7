"""perf and tcpdump for real: a program that spins in busy_wait must be attributed to
busy_wait, and a loopback exchange of known sizes must be counted to the byte."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.collectors.base import InvocationContext, PassContext, Window
from lab.collectors.packets import PacketCapture
from lab.collectors.perf import PerfCollector
from lab.host.procs import CommandLog, run
from tests.conftest import require

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NATIVE_CLIENT = ROOT / "native" / "backup-client"


def _ctx(
    tmp_path: Path, client: Path, receiver_port: int = 1, decoy_port: int = 2
) -> InvocationContext:
    out = tmp_path / "inv1"
    out.mkdir(parents=True, exist_ok=True)
    return InvocationContext(
        run_dir=tmp_path,
        out_dir=out,
        client_path=client,
        source_path=tmp_path / "source.bin",
        source_size=0,
        receiver_port=receiver_port,
        decoy_port=decoy_port,
        invocation=1,
        log=CommandLog(tmp_path / "commands.jsonl", root=tmp_path),
    )


@pytest.fixture(scope="module")
def perf_available() -> None:
    status = PerfCollector.probe()
    require("perf", status.available, status.reason)


def _run_under_perf(
    ctx: InvocationContext, argv: list[str]
) -> tuple[int | None, dict[str, object]]:
    collector = PerfCollector()
    done = run(
        collector.wrap(argv, ctx),
        purpose="client under perf",
        log=ctx.log,
        stdout=ctx.out_dir / "client.stdout",
        stderr=ctx.out_dir / "client.stderr",
        timeout=120.0,
        accept=None,
    )
    out = collector.collect(ctx, done)
    assert out.error is None, out.error
    assert out.summary is not None
    return done.exit_status, out.summary.to_dict()


def test_perf_attributes_the_spin_to_busy_wait(
    perf_available: None, tmp_path: Path, assets: Path
) -> None:
    gcc = shutil.which("gcc")
    require("gcc", gcc is not None, "gcc is not installed; install the Debian package 'gcc'")
    assert gcc is not None
    binary = tmp_path / "busy_wait"
    run(
        [
            gcc,
            "-O0",
            "-g",
            "-fno-omit-frame-pointer",
            "-o",
            str(binary),
            str(assets / "perf" / "busy_wait.c"),
        ],
        purpose="build busy_wait",
    )
    ctx = _ctx(tmp_path, binary)
    status, summary = _run_under_perf(ctx, [str(binary), "0.4", "3"])
    assert status == 3  # perf passes the client's exit status through
    assert summary["event"] in ("cpu-clock", "ibs_op")
    assert isinstance(summary["event_reason"], str) and summary["event_reason"]
    assert isinstance(summary["samples"], int) and summary["samples"] > 100
    assert isinstance(summary["lost_samples"], int)
    assert summary["top_client_symbol"] == "busy_wait"
    annotate = (ctx.out_dir / "perf-annotate.txt").read_text()
    assert "busy_wait" in annotate
    assert (ctx.out_dir / "perf-report.txt").read_text().count("busy_wait") > 0


@pytest.mark.parametrize(
    ("behavior", "symbol"), [("busy-spin", "busy_wait"), ("hash-storm", "hash_file")]
)
def test_perf_on_the_native_client(
    perf_available: None, client: Path, tmp_path: Path, behavior: str, symbol: str
) -> None:
    assert client == NATIVE_CLIENT  # built by the session fixture (make -C native)
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 2048)  # 512 KiB
    # Nobody listens on the port: the client spins or hashes, then fails to connect.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ctx = _ctx(tmp_path, NATIVE_CLIENT)
    argv = [str(NATIVE_CLIENT), "--source", str(source), "--receiver", f"127.0.0.1:{port}"]
    _, summary = _run_under_perf(ctx, [*argv, "--behavior", behavior])
    assert summary["top_client_symbol"] == symbol


class _Endpoint:
    """A loopback TCP server that reads to EOF, then answers ``reply`` and closes."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.received = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port: int = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            while chunk := conn.recv(65536):
                self.received += len(chunk)
            conn.sendall(self.reply)
        self.sock.close()


def _exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    return answer


@pytest.fixture
def endpoints() -> Iterator[tuple[_Endpoint, _Endpoint]]:
    receiver, decoy = _Endpoint(b"OK\n"), _Endpoint(b"")
    yield receiver, decoy
    receiver.thread.join(5)
    decoy.thread.join(5)


def test_capture_counts_a_loopback_exchange_exactly(
    tmp_path: Path, endpoints: tuple[_Endpoint, _Endpoint]
) -> None:
    """Without a namespace (--sandbox off) the capture falls back to lo, filtered on the
    fixture ports; the counts are exact either way."""
    status = PacketCapture.probe()
    require("packets", status.available, status.reason)
    receiver, decoy = endpoints
    ctx = PassContext(
        run_dir=tmp_path,
        out_dir=tmp_path / "pass",
        client_path=tmp_path / "client",
        source_path=tmp_path / "source.bin",
        receiver_address=("127.0.0.1", receiver.port),
        decoy_address=("127.0.0.1", decoy.port),
        log=CommandLog(tmp_path / "commands.jsonl", root=tmp_path),
        netns_argv=[],
        windows=[Window(1, tmp_path / "pass" / "inv1", None, None)],
    )
    ctx.out_dir.mkdir()
    capture = PacketCapture()
    capture.start(ctx)
    ctx.windows[0].start = time.time()
    # A 512 KiB upload, as in the baseline scenario: several 64 KiB loopback segments.
    assert _exchange(receiver.port, b"p" * 524_288) == b"OK\n"
    assert _exchange(decoy.port, b"hello decoy") == b""
    time.sleep(0.05)
    ctx.windows[0].end = time.time()
    out = capture.stop()[1]
    assert out.error is None, out.error
    assert out.summary is not None
    s = out.summary.to_dict()
    receiver.thread.join(5)
    assert receiver.received == 524_288
    assert s["payload_bytes_to_receiver"] == 524_288
    assert s["payload_bytes_from_receiver"] == 3
    assert s["payload_bytes_to_decoy"] == 11
    assert s["payload_bytes_from_decoy"] == 0
    assert s["dropped_by_kernel"] == 0
    assert s["captured"] == s["packets"] + s["packets_outside_invocations"]
    assert s["connections_to_receiver"] == 1
    assert s["connections_to_decoy"] == 1
    assert s["destinations"] == sorted([f"127.0.0.1:{receiver.port}", f"127.0.0.1:{decoy.port}"])
    assert (s["interface"], s["namespace"]) == ("lo", False)
    assert s["filter"] == f"(tcp or udp) and (port {receiver.port} or port {decoy.port})"
    for name in ("pass/capture.pcap", "pass/tcpdump.stderr.txt", "pass/inv1/capture-summary.txt"):
        assert name in out.artifacts
    commands = (tmp_path / "commands.jsonl").read_text()
    assert "tcpdump" in commands
