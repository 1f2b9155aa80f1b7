"""End-to-end checks of the native client and every seeded behavior, on loopback.

The lab's real receiver lives in ``lab/workloads/backup/receiver.py``; this file carries its
own tiny, throwaway receiver for wire protocol v1 (``docs/protocol.md``) so that the client can be
checked independently of it. It counts connections and consumed payload bytes, validates
each upload's digest before committing, and can drop chosen transfers after N payload
bytes. Source bytes read are counted with ``strace -y`` and ``hash_file`` calls with a
bpftrace uprobe, as the lab's collectors do.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lab.host.procs import Completed, run
from tests.conftest import require

SOURCE_SIZE = 512 * 1024  # the brief's default source size
DROP_AFTER = 65_536  # interrupted-transfer: the first transfer is dropped after this many bytes
LINE_LIMIT = 256
HASH_STORM_ROUNDS = 256
#: a complete command line (no client run gets past usage checks with the bad extras below)
USABLE = ["--source", "x", "--receiver", "127.0.0.1:1"]


# --- a throwaway receiver and decoy --------------------------------------------------------


@dataclass
class Transfer:
    """One PUT as the receiver saw it."""

    digest: str
    size: int
    consumed: int = 0
    answer: str = ""


@dataclass
class LoopbackReceiver:
    """Wire protocol v1 on 127.0.0.1, one connection at a time (the client is sequential)."""

    #: transfer number (1-based) -> drop the connection after this many payload bytes
    drop_after: dict[int, int] = field(default_factory=dict)
    #: transfer number (1-based) -> answer this ERR line after the whole payload instead
    refuse: dict[int, str] = field(default_factory=dict)
    max_size: int = 256 * 1024 * 1024
    store: dict[str, bytes] = field(default_factory=dict)
    connections: int = 0
    requests: list[str] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    address: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        host, port = self._listener.getsockname()
        self.address = f"{host}:{port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def payload_bytes(self) -> int:
        return sum(t.consumed for t in self.transfers)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                self.connections += 1
                self._handle(conn)

    def _handle(self, conn: socket.socket) -> None:
        line = read_line(conn)
        if line is None:
            return
        self.requests.append(line)
        parts = line.split(" ")
        valid = (
            len(parts) == 3
            and parts[0] in ("HAVE", "PUT")
            and re.fullmatch(r"[0-9a-f]{64}", parts[1]) is not None
            and parts[2].isdigit()
        )
        if not valid:
            conn.sendall(b"ERR bad-request malformed request line\n")
            return
        verb, digest, size = parts[0], parts[1], int(parts[2])
        if verb == "HAVE":
            held = self.store.get(digest)
            conn.sendall(b"YES\n" if held is not None and len(held) == size else b"NO\n")
            return
        transfer = Transfer(digest=digest, size=size)
        self.transfers.append(transfer)
        if size > self.max_size:
            transfer.answer = "ERR too-large"
            conn.sendall(b"ERR too-large payload exceeds the maximum size\n")
            return
        limit = self.drop_after.get(len(self.transfers))
        payload = read_exactly(conn, size if limit is None else min(limit, size), transfer)
        if limit is not None:
            # Unread payload is left in the socket: closing now resets the connection.
            transfer.answer = "dropped"
            return
        if len(payload) < size:
            transfer.answer = "ERR short-payload"
            return
        refusal = self.refuse.get(len(self.transfers))
        if refusal is not None:
            transfer.answer = refusal
            conn.sendall(refusal.encode("ascii") + b"\n")
            return
        if hashlib.sha256(payload).hexdigest() != digest:
            transfer.answer = "ERR digest-mismatch"
            conn.sendall(b"ERR digest-mismatch payload does not match its digest\n")
            return
        self.store[digest] = payload
        transfer.answer = "OK"
        conn.sendall(b"OK\n")


def read_line(conn: socket.socket) -> str | None:
    data = b""
    while not data.endswith(b"\n"):
        if len(data) >= LINE_LIMIT:
            return None
        chunk = conn.recv(1)
        if not chunk:
            return None
        data += chunk
    return data[:-1].decode("ascii")


def read_exactly(conn: socket.socket, count: int, transfer: Transfer) -> bytes:
    chunks = []
    while transfer.consumed < count:
        chunk = conn.recv(min(65536, count - transfer.consumed))
        if not chunk:
            break
        chunks.append(chunk)
        transfer.consumed += len(chunk)
    return b"".join(chunks)


class Decoy:
    """Records every connection and what it sent."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        host, port = self._listener.getsockname()
        self.address = f"{host}:{port}"
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                while chunk := conn.recv(4096):
                    data += chunk
                self.received.append(data)


# --- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture(scope="module")
def client(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [tool for tool in ("make", "cc") if shutil.which(tool) is None]
    if not Path("/usr/include/openssl/evp.h").exists():
        missing.append("libssl-dev (openssl/evp.h)")
    require("native-build", not missing, f"missing {', '.join(missing)}" if missing else None)
    logs = tmp_path_factory.mktemp("build")
    run(
        ["make", "-C", str(repo_root / "native")],
        purpose="build the native client",
        tool="make",
        stdout=logs / "make.out",
        stderr=logs / "make.err",
        timeout=300,
    )
    return repo_root / "native" / "backup-client"


@pytest.fixture
def receiver() -> Iterator[LoopbackReceiver]:
    server = LoopbackReceiver()
    yield server
    server.close()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A deterministic 512 KiB source generated from a seed, as the lab's workload is."""
    path = tmp_path / "source.bin"
    path.write_bytes(random.Random(20261129).randbytes(SOURCE_SIZE))
    return path


@dataclass
class ClientRun:
    done: Completed
    events: list[dict[str, Any]]
    trace: Path | None

    @property
    def exit_status(self) -> int | None:
        return self.done.exit_status

    @property
    def completion(self) -> dict[str, Any]:
        return self.events[-1]

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == name]


def invoke(
    client: Path, tmp_path: Path, *args: str, strace: str | None = None, tag: str = "inv"
) -> ClientRun:
    """Run the client (under strace when ``strace`` names the syscalls to trace)."""
    argv = [str(client), *args]
    trace = None
    if strace is not None:
        trace = tmp_path / f"{tag}.strace"
        argv = ["strace", "-f", "-qq", "-y", "-s", "0", "-e", f"trace={strace}", "-o", str(trace)]
        argv += [str(client), *args]
    out = tmp_path / f"{tag}.stdout"
    done = run(
        argv,
        purpose=f"backup client {tag}",
        stdout=out,
        stderr=tmp_path / f"{tag}.stderr",
        timeout=120,
        accept=None,
    )
    lines = out.read_text(encoding="ascii").splitlines()
    events = [json.loads(line) for line in lines]  # every stdout line is one JSON object
    assert events, "the client printed no event"
    assert all(isinstance(e, dict) and isinstance(e.get("event"), str) for e in events)
    assert [e["event"] for e in events].count("complete") == 1
    assert events[-1]["event"] == "complete"
    # exits 0 exactly when it claims success
    assert (done.exit_status == 0) == (events[-1]["status"] == "ok")
    return ClientRun(done=done, events=events, trace=trace)


def backup_args(source: Path, receiver: LoopbackReceiver, *extra: str) -> list[str]:
    return ["--source", str(source), "--receiver", receiver.address, *extra]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def require_strace() -> None:
    require("strace", shutil.which("strace") is not None, "strace is not installed")


def source_bytes_read(trace: Path, source: Path) -> int:
    """Bytes returned by read(2) on descriptors that strace -y decodes as the source."""
    pattern = re.compile(r"^(?:\d+\s+)?read\(\d+<(?P<path>[^>]*)>,.*\)\s+=\s+(?P<n>\d+)")
    total = 0
    for line in trace.read_text().splitlines():
        match = pattern.match(line)
        if match and match["path"] == str(source.resolve()):
            total += int(match["n"])
    return total


def syscall_names(trace: Path) -> list[str]:
    names = []
    for line in trace.read_text().splitlines():
        match = re.match(r"^(?:\d+\s+)?([a-z_0-9]+)\(", line)
        if match:
            names.append(match[1])
    return names


def inet_connects(trace: Path) -> list[str]:
    """Destinations of every AF_INET connect(2), as ``ip:port``."""
    found = []
    for line in trace.read_text().splitlines():
        match = re.search(r"connect\(.*sin_port=htons\((\d+)\).*inet_addr\(\"([\d.]+)\"\)", line)
        if match:
            found.append(f"{match[2]}:{match[1]}")
    return found


# --- the correct client --------------------------------------------------------------------


def test_baseline_uploads_once_then_skips(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    first = invoke(client, tmp_path, *backup_args(source, receiver), tag="first")
    assert first.completion == {"event": "complete", "status": "ok"}
    assert first.named("hashed") == [
        {"event": "hashed", "sha256": sha256(source), "size": SOURCE_SIZE}
    ]
    assert first.named("have") == [{"event": "have", "answer": "NO"}]
    assert receiver.connections == 2
    assert receiver.payload_bytes == SOURCE_SIZE
    assert receiver.store == {sha256(source): source.read_bytes()}

    second = invoke(client, tmp_path, *backup_args(source, receiver), tag="second")
    assert second.exit_status == 0
    assert second.named("have") == [{"event": "have", "answer": "YES"}]
    assert second.named("upload") == []
    assert receiver.connections == 3  # 2 then 1
    assert receiver.payload_bytes == SOURCE_SIZE  # nothing more on the second run
    assert receiver.requests == [
        f"HAVE {sha256(source)} {SOURCE_SIZE}",
        f"PUT {sha256(source)} {SOURCE_SIZE}",
        f"HAVE {sha256(source)} {SOURCE_SIZE}",
    ]


def test_baseline_syscalls_read_source_once_per_use(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    require_strace()
    args = backup_args(source, receiver)
    first = invoke(client, tmp_path, *args, strace="read,connect", tag="first")
    assert first.trace is not None
    # once for the hash, once for the payload
    assert source_bytes_read(first.trace, source) == 2 * SOURCE_SIZE
    assert inet_connects(first.trace) == [receiver.address] * 2
    second = invoke(client, tmp_path, *args, strace="read,connect", tag="second")
    assert second.trace is not None
    assert source_bytes_read(second.trace, source) == SOURCE_SIZE
    assert inet_connects(second.trace) == [receiver.address]


def test_localhost_receiver_name_resolves(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    port = receiver.address.rsplit(":", 1)[1]
    done = invoke(client, tmp_path, "--source", str(source), "--receiver", f"localhost:{port}")
    assert done.exit_status == 0
    assert sha256(source) in receiver.store


def test_empty_source_is_backed_up(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver
) -> None:
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    done = invoke(client, tmp_path, *backup_args(empty, receiver))
    assert done.exit_status == 0
    assert receiver.store == {hashlib.sha256(b"").hexdigest(): b""}


def test_interrupted_transfer_restarts_from_byte_zero(
    client: Path, tmp_path: Path, source: Path
) -> None:
    receiver = LoopbackReceiver(drop_after={1: DROP_AFTER})
    try:
        done = invoke(client, tmp_path, *backup_args(source, receiver))
    finally:
        receiver.close()
    assert done.exit_status == 0
    uploads = done.named("upload")
    assert [u["attempt"] for u in uploads] == [1, 2]
    assert [u["result"] for u in uploads] == ["dropped", "ok"]
    assert receiver.connections == 3  # HAVE, dropped PUT, PUT on a new connection
    # 65,536 + 524,288: the second transfer carried the whole file again, from byte 0
    assert receiver.payload_bytes == DROP_AFTER + SOURCE_SIZE == 589_824
    assert receiver.store == {sha256(source): source.read_bytes()}


def test_gives_up_after_three_dropped_transfers(client: Path, tmp_path: Path, source: Path) -> None:
    receiver = LoopbackReceiver(drop_after={k: DROP_AFTER for k in range(1, 10)})
    try:
        done = invoke(client, tmp_path, *backup_args(source, receiver))
    finally:
        receiver.close()
    assert done.exit_status == 1
    assert done.completion["status"] == "failed"
    assert "3 upload attempts" in done.completion["reason"]
    assert [u["result"] for u in done.named("upload")] == ["dropped"] * 3
    assert len(receiver.transfers) == 3
    assert receiver.store == {}


def test_too_large_is_final_without_retry(client: Path, tmp_path: Path, source: Path) -> None:
    receiver = LoopbackReceiver(max_size=1024)
    try:
        done = invoke(client, tmp_path, *backup_args(source, receiver))
    finally:
        receiver.close()
    assert done.exit_status == 1
    assert "too-large" in done.completion["reason"]
    assert len(receiver.transfers) == 1


@pytest.mark.parametrize(
    ("refusal", "retried"),
    [
        ("ERR timeout payload stalled", True),
        ("ERR short-payload payload ended early", True),
        ("ERR internal could not commit", False),
        ("ERR bad-request malformed", False),
        ("ERR timeouts-are-not-timeout made-up code", False),
    ],
)
def test_transient_errors_are_retried_and_others_are_final(
    client: Path, tmp_path: Path, source: Path, refusal: str, retried: bool
) -> None:
    receiver = LoopbackReceiver(refuse={1: refusal})
    try:
        done = invoke(client, tmp_path, *backup_args(source, receiver))
    finally:
        receiver.close()
    results = [u["result"] for u in done.named("upload")]
    if retried:
        assert results == ["rejected", "ok"]
        assert done.exit_status == 0
        assert sha256(source) in receiver.store
    else:
        assert results == ["rejected"]
        assert done.exit_status == 1
        assert refusal in done.completion["reason"]
        assert receiver.store == {}


def test_unreachable_receiver_fails_honestly(client: Path, tmp_path: Path, source: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as reserved:
        port = reserved.getsockname()[1]
    # nothing listens on the port any more
    done = invoke(client, tmp_path, "--source", str(source), "--receiver", f"127.0.0.1:{port}")
    assert done.exit_status == 1
    assert "cannot connect" in done.completion["reason"]


def test_missing_source_fails(client: Path, tmp_path: Path, receiver: LoopbackReceiver) -> None:
    done = invoke(client, tmp_path, *backup_args(tmp_path / "absent.bin", receiver))
    assert done.exit_status == 1
    assert "cannot read source" in done.completion["reason"]
    assert receiver.connections == 0


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ([], "--source PATH and --receiver HOST:PORT are required"),
        (["--source", "x"], "--source PATH and --receiver HOST:PORT are required"),
        (["--source", "x", "--receiver", "127.0.0.1"], "expected HOST:PORT"),
        (["--source", "x", "--receiver", "127.0.0.1:0"], "port must be"),
        ([*USABLE, "--behavior", "nope"], "unknown behavior"),
        ([*USABLE, "--colour"], "unknown option"),
        ([*USABLE, "--source", "y"], "given twice"),
        ([*USABLE, "extra"], "unexpected argument"),
        ([*USABLE, "--spin-ms", "soon"], "--spin-ms"),
        (
            [*USABLE, "--behavior", "unexpected-egress"],
            "--decoy",
        ),
    ],
)
def test_bad_usage_exits_2_with_reason(
    client: Path, tmp_path: Path, args: list[str], why: str
) -> None:
    done = invoke(client, tmp_path, *args)
    assert done.exit_status == 2
    assert done.completion["status"] == "failed"
    assert done.completion["reason"].startswith("usage: ")
    assert why in done.completion["reason"]


def test_equals_form_of_options(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    done = invoke(client, tmp_path, f"--source={source}", f"--receiver={receiver.address}")
    assert done.exit_status == 0


# --- the seeded behaviors ------------------------------------------------------------------


def test_false_success_claims_ok_without_any_network(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    require_strace()
    args = backup_args(source, receiver, "--behavior", "false-success")
    done = invoke(client, tmp_path, *args, strace="%network", tag="false")
    assert done.exit_status == 0
    assert done.completion == {"event": "complete", "status": "ok"}
    assert done.trace is not None
    assert syscall_names(done.trace) == []  # no socket, no connect, nothing
    assert receiver.connections == 0
    assert receiver.store == {}


def test_hash_storm_hashes_256_times_and_reads_256x_when_unchanged(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    require_strace()
    args = backup_args(source, receiver, "--behavior", "hash-storm")
    first = invoke(client, tmp_path, *args, strace="read", tag="first")
    assert len(first.named("hashed")) == HASH_STORM_ROUNDS
    assert first.exit_status == 0
    assert first.trace is not None
    # 256 hashes plus the payload of the upload
    assert source_bytes_read(first.trace, source) == (HASH_STORM_ROUNDS + 1) * SOURCE_SIZE

    second = invoke(client, tmp_path, *args, strace="read", tag="second")
    assert second.exit_status == 0
    assert second.named("upload") == []
    assert second.trace is not None
    assert source_bytes_read(second.trace, source) == 134_217_728  # 256 x 524,288


def test_hash_storm_uprobe_counts_256_hash_file_calls(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    available = shutil.which("bpftrace") is not None and os.geteuid() == 0
    require("bpftrace", available, "bpftrace needs to be installed and run as root")
    command = " ".join([str(client), *backup_args(source, receiver, "--behavior", "hash-storm")])
    probes = (
        f"uprobe:{client}:hash_file {{ @hash_calls = count(); }} "
        f"uprobe:{client}:send_payload {{ @send_payload_calls = count(); }}"
    )
    out = tmp_path / "bpftrace.out"
    run(
        ["bpftrace", "-e", probes, "-c", command],
        purpose="count client function entries",
        tool="bpftrace",
        stdout=out,
        stderr=tmp_path / "bpftrace.err",
        timeout=120,
    )
    maps = dict(re.findall(r"^(@\w+): (\d+)$", out.read_text(), flags=re.MULTILINE))
    assert maps == {"@hash_calls": "256", "@send_payload_calls": "1"}


def test_busy_spin_burns_cpu_in_busy_wait_without_sleeping(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    require_strace()
    args = backup_args(source, receiver, "--behavior", "busy-spin", "--spin-ms", "400")
    plain = invoke(client, tmp_path, *args, tag="plain")
    assert plain.exit_status == 0
    assert sha256(source) in receiver.store
    assert plain.done.duration_s >= 0.4
    # A baseline run uses a few milliseconds of CPU; a spin of 400 ms uses far more even when
    # other work on this 2-core machine preempts it (the spin is measured in wall time).
    assert plain.done.cpu_s is not None
    assert plain.done.cpu_s >= 0.1
    traced = invoke(client, tmp_path, *args, strace="all", tag="traced")
    assert traced.trace is not None
    sleeping = {"nanosleep", "clock_nanosleep", "select", "poll", "pselect6", "ppoll"}
    assert not sleeping & set(syscall_names(traced.trace))


def test_unexpected_egress_contacts_the_decoy_first(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    require_strace()
    decoy = Decoy()
    try:
        args = backup_args(source, receiver, "--behavior", "unexpected-egress")
        args += ["--decoy", decoy.address]
        first = invoke(client, tmp_path, *args, strace="connect", tag="first")
        second = invoke(client, tmp_path, *args, strace="connect", tag="second")
    finally:
        decoy.close()
    assert first.exit_status == 0
    assert second.exit_status == 0
    assert first.trace is not None
    assert second.trace is not None
    assert inet_connects(first.trace) == [decoy.address] + [receiver.address] * 2
    assert inet_connects(second.trace) == [decoy.address, receiver.address]
    assert decoy.received == [b"HELLO\n", b"HELLO\n"]
    assert receiver.connections == 3
    assert receiver.store == {sha256(source): source.read_bytes()}


def test_corrupt_payload_is_rejected_and_reported(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    older = b"an older backup"
    receiver.store[hashlib.sha256(older).hexdigest()] = older
    args = backup_args(source, receiver, "--behavior", "corrupt-payload")
    for tag in ("first", "second"):
        done = invoke(client, tmp_path, *args, tag=tag)
        assert done.exit_status == 1
        assert done.completion["status"] == "failed"
        assert "digest-mismatch" in done.completion["reason"]
        assert [u["result"] for u in done.named("upload")] == ["rejected"]  # no retry
    # the real digest and size were advertised, with a full-size payload
    assert [(t.digest, t.size, t.consumed) for t in receiver.transfers] == [
        (sha256(source), SOURCE_SIZE, SOURCE_SIZE)
    ] * 2
    assert receiver.store == {hashlib.sha256(older).hexdigest(): older}


def test_redundant_upload_ignores_yes(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    args = backup_args(source, receiver, "--behavior", "redundant-upload")
    invoke(client, tmp_path, *args, tag="first")
    second = invoke(client, tmp_path, *args, tag="second")
    assert second.exit_status == 0
    assert second.named("have") == [{"event": "have", "answer": "YES"}]
    assert [u["result"] for u in second.named("upload")] == ["ok"]
    assert receiver.connections == 4  # 2 then 2
    assert receiver.payload_bytes == 2 * SOURCE_SIZE


def test_busy_spin_cpu_samples_land_in_busy_wait(
    client: Path, tmp_path: Path, receiver: LoopbackReceiver, source: Path
) -> None:
    require("perf", shutil.which("perf") is not None, "perf (linux-perf) is not installed")
    data = tmp_path / "perf.data"
    args = backup_args(source, receiver, "--behavior", "busy-spin", "--spin-ms", "300")
    record = ["perf", "record", "-e", "cpu-clock", "-F", "999", "-o", str(data), "--"]
    run(
        [*record, str(client), *args],
        purpose="sample the busy-spin client",
        tool="perf",
        stdout=tmp_path / "record.out",
        stderr=tmp_path / "record.err",
        timeout=120,
    )
    report = tmp_path / "report.txt"
    run(
        ["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "symbol"],
        purpose="self samples by symbol",
        tool="perf",
        stdout=report,
        stderr=tmp_path / "report.err",
        timeout=120,
    )
    shares = {
        m[2]: float(m[1])
        for m in re.finditer(r"^\s+([\d.]+)%\s+\[.\]\s+(\S+)", report.read_text(), re.MULTILINE)
    }
    assert max(shares, key=lambda s: shares[s]) == "busy_wait"
    assert shares["busy_wait"] > 50.0
