"""The receiver and decoy on real loopback sockets: protocol, faults, hostile input."""

from __future__ import annotations

import hashlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.workloads.backup.decoy import Decoy
from lab.workloads.backup.receiver import (
    Fault,
    Limits,
    Receiver,
    saved_backup,
    summarize,
    summarize_decoy,
)

PAYLOAD = hashlib.shake_256(b"payload").digest(200_000)
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


def talk(address: str, data: bytes, *, shut: bool = True, timeout: float = 5.0) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
        except OSError:  # the receiver answered and closed first (ERR busy, too-large, ...)
            pass
        return read_answer(s)


def read_answer(s: socket.socket) -> bytes:
    """Everything the receiver sends until it closes (a reset ends it too)."""
    chunks = []
    try:
        while chunk := s.recv(4096):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


@pytest.fixture
def rx(tmp_path: Path) -> Iterator[Receiver]:
    limits = Limits(max_size=1 << 20, header_timeout=0.5, stall_timeout=0.5, max_connections=8)
    with Receiver.serving(tmp_path / "store", tmp_path / "rx.jsonl", limits=limits) as r:
        r.invocation = 1
        yield r


def saved(rx: Receiver) -> bytes:
    path = saved_backup(rx.store_dir)
    assert path is not None
    return path.read_bytes()


def put(rx: Receiver, payload: bytes = PAYLOAD, digest: str = DIGEST) -> bytes:
    return talk(rx.address, f"PUT {digest} {len(payload)}\n".encode() + payload)


def test_have_then_put_then_have(rx: Receiver) -> None:
    assert talk(rx.address, f"HAVE {DIGEST} {len(PAYLOAD)}\n".encode()) == b"NO\n"
    assert put(rx) == b"OK\n"
    assert saved(rx) == PAYLOAD
    assert talk(rx.address, f"HAVE {DIGEST} {len(PAYLOAD)}\n".encode()) == b"YES\n"
    rx.wait_idle()
    s = summarize(rx.records, invocation=1, held_at_start=False)
    assert (s.connections, s.payload_bytes_consumed, s.upload_attempts) == (3, len(PAYLOAD), 1)
    assert s.committed and s.have_answers == ["NO", "YES"] and s.decisions == ["committed"]


def test_digest_mismatch_is_rejected_before_commit(rx: Receiver) -> None:
    older = b"older backup" * 100
    rx.preload(older)
    bad = bytearray(PAYLOAD)
    bad[1000] ^= 0xFF
    answer = put(rx, bytes(bad), DIGEST)
    assert answer.startswith(b"ERR digest-mismatch")
    assert saved(rx) == older
    assert [p.name for p in rx.store_dir.iterdir()] == ["backup.bin"]  # one file, no digest
    rx.wait_idle()
    s = summarize(rx.records, invocation=1, held_at_start=False)
    assert s.rejected_uploads == 1 and not s.committed


def test_short_payload_is_not_committed(rx: Receiver) -> None:
    answer = talk(rx.address, f"PUT {DIGEST} {len(PAYLOAD)}\n".encode() + PAYLOAD[:1000])
    assert answer.startswith(b"ERR short-payload")
    assert saved_backup(rx.store_dir) is None


def test_stalled_client_times_out(rx: Receiver) -> None:
    answer = talk(rx.address, f"PUT {DIGEST} {len(PAYLOAD)}\n".encode() + b"x", shut=False)
    assert answer.startswith(b"ERR timeout")
    assert talk(rx.address, b"", shut=False).startswith(b"ERR timeout")  # no request line
    assert saved_backup(rx.store_dir) is None


def test_injected_fault_drops_after_exact_bytes(tmp_path: Path) -> None:
    with Receiver.serving(
        tmp_path / "s", tmp_path / "r.jsonl", faults=[Fault(transfer=1, drop_after=65536)]
    ) as rx:
        rx.invocation = 1
        first = put(rx)
        assert first == b""  # dropped, no answer
        assert put(rx) == b"OK\n"
        rx.wait_idle()
        s = summarize(rx.records, invocation=1, held_at_start=False)
    assert s.payload_bytes_consumed == 65536 + len(PAYLOAD)
    assert s.decisions == ["dropped-by-fault", "committed"] and s.dropped_transfers == 1


@pytest.mark.parametrize(
    ("data", "prefix"),
    [
        (b"GET / HTTP/1.0\r\n\r\n", b"ERR bad-request"),
        (b"HAVE nothex 5\n", b"ERR bad-request"),
        (b"PUT " + b"a" * 64 + b" 99999999999\n", b"ERR too-large"),
        (b"A" * 1000, b"ERR line-too-long"),
        (b"HAVE " + b"a" * 64, b""),  # truncated header: closed without answer
    ],
)
def test_bad_input_gets_error_and_is_recorded(rx: Receiver, data: bytes, prefix: bytes) -> None:
    assert talk(rx.address, data).startswith(prefix)
    rx.wait_idle()
    assert any(r["event"] == "protocol-error" for r in rx.records)
    assert saved_backup(rx.store_dir) is None


def test_many_connections_at_once(rx: Receiver) -> None:
    results: list[bytes] = []
    lock = threading.Lock()

    def one() -> None:
        out = talk(rx.address, f"HAVE {DIGEST} 1\n".encode(), timeout=10)
        with lock:
            results.append(out)

    threads = [threading.Thread(target=one) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # beyond max_connections (8 here) a connection is answered, never just closed
    assert len(results) == 40 and all(r == b"NO\n" or r.startswith(b"ERR busy ") for r in results)
    assert put(rx) == b"OK\n"  # still serving


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=600))
def test_garbage_never_commits_or_crashes(rx: Receiver, data: bytes) -> None:
    talk(rx.address, data)
    assert saved_backup(rx.store_dir) is None
    assert talk(rx.address, f"HAVE {DIGEST} 1\n".encode()) == b"NO\n"


def test_decoy_records_whoever_connects(tmp_path: Path) -> None:
    with Decoy.serving(tmp_path / "d.jsonl") as decoy:
        decoy.invocation = 2
        talk(decoy.address, b"HELLO\n")
        decoy.wait_idle()
        s = summarize_decoy(decoy.records, invocation=2)
    assert s.connections == 1 and s.bytes_received == 6
    assert (tmp_path / "d.jsonl").read_text().count('"event": "connect"') == 1
