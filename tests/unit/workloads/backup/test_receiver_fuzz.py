"""Fuzzing the receiver with arbitrary byte streams (hypothesis, 10,000 examples each).

The request parser, and the whole connection handler over real loopback sockets: whatever
arrives, in whatever pieces, ended by a half-close or a reset, the receiver answers one
well-formed line or records why it closed without one, never records an internal error, and
never commits a payload whose SHA-256 differs from its advertised digest.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.workloads.backup import protocol
from lab.workloads.backup.receiver import Fault, Limits, Receiver, saved_backup
from tests.unit.workloads.backup.test_receiver import read_answer

EXAMPLES = 10_000
ANSWER = re.compile(
    rb"(YES|NO|OK|ERR (" + b"|".join(c.encode() for c in protocol.ERROR_CODES) + rb") [ -~]*)\n"
)
#: a few transfers are dropped by an injected fault, so drops are fuzzed too
FAULTS = [Fault(transfer=t, drop_after=d) for t, d in ((3, 0), (40, 5), (400, 100), (4000, 1))]


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    """A request stream: mostly v1 requests with one flaw or none, sometimes pure noise."""
    flaw = draw(st.sampled_from(["none"] * 6 + ["verb", "digest", "size", "ending", "noise"]))
    if flaw == "noise":
        return draw(st.binary(max_size=400))
    content = draw(st.binary(max_size=300))
    verb = draw(st.sampled_from([b"PUT", b"PUT", b"HAVE"]))
    digest = hashlib.sha256(content).hexdigest().encode()
    size = b"%d" % len(content)
    ending = b"\n"
    if flaw == "verb":
        verb = draw(st.sampled_from([b"GET", b"put", b"", b"PUT ", b"HAVE\x00"]))
    elif flaw == "digest":
        digest = draw(st.sampled_from([digest.upper(), digest[:63], b"g" * 64, b""]))
    elif flaw == "size":
        number = draw(st.one_of(st.integers(0, 400), st.integers(0, 10**30)))
        size = draw(st.sampled_from([b"%d", b"0%d", b"%d ", b"+%d", b"-%d"])) % number
    elif flaw == "ending":
        ending = draw(st.sampled_from([b"\r\n", b"", b" \n"]))
    payload = content
    if payload and draw(st.booleans()):  # a payload that differs from its digest
        at = draw(st.integers(0, len(payload) - 1))
        payload = payload[:at] + bytes([payload[at] ^ 0x01]) + payload[at + 1 :]
    if draw(st.integers(0, 3)) == 0:  # cut short
        payload = payload[: draw(st.integers(0, len(payload)))]
    return b" ".join([verb, digest, size]) + ending + payload + draw(st.binary(max_size=8))


@pytest.fixture(scope="module")
def fuzz_rx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    base = tmp_path_factory.mktemp("fuzz")
    limits = Limits(
        max_size=4096, header_timeout=2, stall_timeout=2, request_deadline=4, max_uploads=8
    )
    with Receiver.serving(base / "store", base / "rx.jsonl", faults=FAULTS, limits=limits) as rx:
        rx.invocation = 1
        yield rx


class NewRecords:
    """The records written since the last call (the file is read incrementally)."""

    def __init__(self, path: Path) -> None:
        self.fh = open(path, encoding="utf-8")  # noqa: SIM115

    def __call__(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.fh.readlines()]


def exchange(address: str, stream: bytes, cuts: list[int], ending: str) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        try:
            start = 0
            for cut in [*sorted(c % (len(stream) + 1) for c in cuts), len(stream)]:
                s.sendall(stream[start:cut])
                start = max(start, cut)
            if ending == "reset":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return b""
            s.shutdown(socket.SHUT_WR)
        except OSError:  # answered and closed before everything was sent
            pass
        return read_answer(s)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=300) | requests().map(lambda b: b.split(b"\n", 1)[0] + b"\n"))
def test_parser_answers_every_line(line: bytes) -> None:
    try:
        request = protocol.parse_request(line, max_size=4096)
    except protocol.ProtocolViolation as exc:
        assert exc.code in protocol.ERROR_CODES
        assert ANSWER.fullmatch(protocol.format_error(exc.code, exc.text))
    else:  # only a canonical v1 line parses, and it is exactly what was sent
        canonical = f"{request.verb} {request.digest} {request.size}".encode()
        assert line.removesuffix(b"\n") == canonical and request.size <= 4096


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    stream=requests(),
    cuts=st.lists(st.integers(0, 1000), max_size=3),
    ending=st.sampled_from(["shut", "shut", "reset"]),
)
def test_connection_handler_under_arbitrary_streams(
    fuzz_rx: Receiver, stream: bytes, cuts: list[int], ending: str
) -> None:
    new_records = getattr(fuzz_rx, "_fuzz_new_records", None)
    if new_records is None:
        new_records = NewRecords(fuzz_rx.records_path)
        fuzz_rx._fuzz_new_records = new_records  # type: ignore[attr-defined]
    answer = exchange(fuzz_rx.address, stream, cuts, ending)
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10  # a reset connection may not even be accepted yet
    while not any(r["event"] == "close" for r in rows) and time.monotonic() < deadline:
        fuzz_rx.wait_idle(10)
        rows += new_records()
    events = [r["event"] for r in rows]
    assert "internal-error" not in events and "connection-error" not in events, rows
    assert events.count("connect") == 1 and events[-1] == "close", rows
    if answer:
        assert ANSWER.fullmatch(answer), answer
        assert events.count("answer") + events.count("refused") == 1, rows
    else:  # no answer: a reset, a drop, or a close the records explain
        explained = {"protocol-error", "decision", "answer", "refused"}
        assert explained & set(events), rows
    if answer == b"OK\n":
        line, _, rest = stream.partition(b"\n")
        request = protocol.parse_request(line + b"\n", max_size=4096)
        assert request.verb == "PUT"
        assert hashlib.sha256(rest[: request.size]).hexdigest() == request.digest
    saved = saved_backup(fuzz_rx.store_dir)
    if saved is not None:  # whatever was committed matches the digest the receiver answers by
        assert hashlib.sha256(saved.read_bytes()).hexdigest() == fuzz_rx.saved_digest
