"""The receiver and the decoy: loopback TCP endpoints that keep their own records.

The receiver speaks wire protocol v1 (``docs/protocol.md``). It never trusts an advertised
digest: every upload is hashed while it is consumed and only a payload whose SHA-256 equals
the advertised one is committed, atomically (temporary file, fsync, rename, directory fsync),
so a rejected or interrupted upload never replaces or damages the saved backup. Every
connection, request, answer, decision and consumed payload byte is recorded as a JSON line.

    with Receiver.serving(store_dir, records_path, faults=[Fault(transfer=1, drop_after=65536)])
        as receiver:
        receiver.invocation = 1
        ...  # run the client against receiver.address
    summary = summarize(receiver.records, invocation=1, held_at_start=False)

Both endpoints run on their own asyncio loop in a background thread, so the runner stays
synchronous and the client is the only process being traced.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.host.clock import now_rfc3339
from lab.model import DecoySummary, ReceiverSummary
from lab.run import protocol

BACKUP_NAME = "backup.bin"
DIGEST_NAME = "backup.sha256"
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Fault:
    """Drop the connection after ``drop_after`` payload bytes of the ``transfer``-th PUT
    (counted from 1 over the receiver's whole life, i.e. over every invocation of a pass)."""

    transfer: int
    drop_after: int


@dataclass(frozen=True)
class Limits:
    max_size: int = protocol.DEFAULT_MAX_SIZE
    #: seconds to wait for a complete request line
    header_timeout: float = 10.0
    #: seconds without any payload byte before the upload is abandoned
    stall_timeout: float = 10.0
    #: concurrent connections beyond this are closed at once (and recorded)
    max_connections: int = 64


class _Endpoint:
    """A loopback listener on its own event loop thread, with JSON-line records."""

    role = "endpoint"

    def __init__(
        self, records_path: Path, limits: Limits, sock: socket.socket | None = None
    ) -> None:
        self.sock = sock
        self.records_path = records_path
        self.limits = limits
        self.invocation = 0
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._conn_seq = 0
        self._active = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        records_path.parent.mkdir(parents=True, exist_ok=True)
        records_path.write_text("")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def record(self, event: str, **fields: Any) -> None:
        row = {
            "ts": now_rfc3339(),
            "clock": "realtime",
            "mono_ns": time.monotonic_ns(),
            "source": self.role,
            "invocation": self.invocation,
            "event": event,
            **fields,
        }
        line = json.dumps(row, sort_keys=True)
        with self._lock:
            self.records.append(row)
            with open(self.records_path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.role, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._startup_error is not None:
            raise self._startup_error
        if not self.port:
            raise RuntimeError(f"the {self.role} did not start listening within 10 s")

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._listen())
        except BaseException as exc:  # reported to start(), never lost
            self._startup_error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._shutdown())
        loop.close()

    async def _listen(self) -> None:
        if self.sock is not None:
            self._server = await asyncio.start_server(
                self._accept, sock=self.sock, limit=protocol.MAX_LINE + 1
            )
        else:
            self._server = await asyncio.start_server(
                self._accept, host="127.0.0.1", port=0, limit=protocol.MAX_LINE + 1
            )
        self.port = int(self._server.sockets[0].getsockname()[1])
        self.record("listening", address=self.address)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no connection is being handled (records of an invocation complete)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._active == 0:
                return True
            time.sleep(0.005)
        return False

    # -- connections -----------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._conn_seq += 1
        conn = self._conn_seq
        peer = writer.get_extra_info("peername")
        peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._active += 1
        self.record("connect", conn=conn, peer=peer_text)
        try:
            if self._active > self.limits.max_connections:
                self.record("refused", conn=conn, why="too many concurrent connections")
            else:
                await self.handle(conn, reader, writer)
        except asyncio.CancelledError:
            self.record("aborted", conn=conn, why="receiver shutting down")
        except (ConnectionError, OSError) as exc:
            self.record("connection-error", conn=conn, error=type(exc).__name__)
        except Exception as exc:  # never crash the endpoint; keep the evidence
            self.record("internal-error", conn=conn, error=f"{type(exc).__name__}: {exc}")
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            self.record("close", conn=conn)
            self._active -= 1
            self._tasks.discard(task)

    async def handle(
        self, conn: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        raise NotImplementedError


class Decoy(_Endpoint):
    """A second local endpoint that records anything that connects to it."""

    role = "decoy"

    async def handle(
        self, conn: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        received = 0
        first = b""
        with contextlib.suppress(TimeoutError, ConnectionError):
            while received < 64 * 1024:
                chunk = await asyncio.wait_for(reader.read(4096), timeout=2.0)
                if not chunk:
                    break
                if len(first) < 64:
                    first += chunk[: 64 - len(first)]
                received += len(chunk)
        self.record("received", conn=conn, bytes=received, first_bytes=first.hex())

    @classmethod
    @contextlib.contextmanager
    def serving(
        cls, records_path: Path, limits: Limits | None = None, *, sock: socket.socket | None = None
    ) -> Iterator[Decoy]:
        decoy = cls(records_path, limits or Limits(), sock)
        decoy.start()
        try:
            yield decoy
        finally:
            decoy.stop()


class Receiver(_Endpoint):
    role = "receiver"

    def __init__(
        self,
        store_dir: Path,
        records_path: Path,
        *,
        faults: list[Fault] | None = None,
        limits: Limits | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        super().__init__(records_path, limits or Limits(), sock)
        self.store_dir = store_dir
        store_dir.mkdir(parents=True, exist_ok=True)
        self.faults = {f.transfer: f for f in faults or []}
        self.transfers = 0
        self._commit_lock = asyncio.Lock()
        digest_file = store_dir / DIGEST_NAME
        self.saved_digest: str | None = (
            digest_file.read_text().strip() if digest_file.exists() else None
        )

    @classmethod
    @contextlib.contextmanager
    def serving(
        cls,
        store_dir: Path,
        records_path: Path,
        *,
        faults: list[Fault] | None = None,
        limits: Limits | None = None,
        sock: socket.socket | None = None,
    ) -> Iterator[Receiver]:
        receiver = cls(store_dir, records_path, faults=faults, limits=limits, sock=sock)
        receiver.start()
        try:
            yield receiver
        finally:
            receiver.stop()

    def preload(self, content: bytes) -> str:
        """Save an older backup before any invocation (scenarios that start with one)."""
        digest = hashlib.sha256(content).hexdigest()
        tmp = self.store_dir / ".preload.tmp"
        tmp.write_bytes(content)
        _commit_file(tmp, self.store_dir, digest)
        self.saved_digest = digest
        self.record("preloaded", digest=digest, size=len(content))
        return digest

    async def _answer(self, conn: int, writer: asyncio.StreamWriter, line: bytes) -> None:
        writer.write(line)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        self.record("answer", conn=conn, answer=line.decode("ascii").rstrip("\n"))

    async def handle(
        self, conn: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            line = await asyncio.wait_for(
                reader.readuntil(b"\n"), timeout=self.limits.header_timeout
            )
        except TimeoutError:
            self.record("protocol-error", conn=conn, code="timeout", text="no request line")
            await self._answer(conn, writer, protocol.format_error("timeout", "no request line"))
            return
        except asyncio.LimitOverrunError:
            self.record("protocol-error", conn=conn, code="line-too-long", text="request line")
            await self._answer(
                conn, writer, protocol.format_error("line-too-long", "request line too long")
            )
            return
        except asyncio.IncompleteReadError as exc:
            self.record(
                "protocol-error",
                conn=conn,
                code="bad-request",
                text="connection closed before a complete request line",
                partial_bytes=len(exc.partial),
            )
            return
        try:
            request = protocol.parse_request(line, max_size=self.limits.max_size)
        except protocol.ProtocolViolation as exc:
            self.record("protocol-error", conn=conn, code=exc.code, text=exc.text)
            await self._answer(conn, writer, protocol.format_error(exc.code, exc.text))
            return
        self.record(
            "request", conn=conn, verb=request.verb, digest=request.digest, size=request.size
        )
        if request.verb == "HAVE":
            answer = protocol.YES if request.digest == self.saved_digest else protocol.NO
            await self._answer(conn, writer, answer)
            return
        await self._put(conn, request, reader, writer)

    async def _put(
        self,
        conn: int,
        request: protocol.Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.transfers += 1
        transfer = self.transfers
        fault = self.faults.get(transfer)
        limit = request.size if fault is None else min(fault.drop_after, request.size)
        digest = hashlib.sha256()
        consumed = 0
        tmp = self.store_dir / f".upload-{conn}.tmp"
        outcome = "short-payload"
        try:
            with open(tmp, "wb") as fh:
                while consumed < limit:
                    want = min(_CHUNK, limit - consumed)
                    try:
                        chunk = await asyncio.wait_for(
                            reader.read(want), timeout=self.limits.stall_timeout
                        )
                    except TimeoutError:
                        outcome = "timeout"
                        break
                    if not chunk:
                        outcome = "short-payload"
                        break
                    consumed += len(chunk)
                    digest.update(chunk)
                    fh.write(chunk)
                else:
                    outcome = "complete"
            self.record(
                "payload", conn=conn, transfer=transfer, bytes=consumed, advertised=request.size
            )
            if fault is not None and consumed >= limit and limit < request.size:
                self.record(
                    "decision",
                    conn=conn,
                    transfer=transfer,
                    decision="dropped-by-fault",
                    consumed=consumed,
                    why=f"injected fault: drop after {fault.drop_after} payload bytes",
                )
                writer.transport.abort()
                return
            if outcome != "complete":
                text = {
                    "timeout": "payload stalled",
                    "short-payload": f"payload ended after {consumed} of {request.size} bytes",
                }[outcome]
                self.record(
                    "decision", conn=conn, transfer=transfer, decision=outcome, consumed=consumed
                )
                await self._answer(conn, writer, protocol.format_error(outcome, text))
                return
            actual = digest.hexdigest()
            if actual != request.digest:
                self.record(
                    "decision",
                    conn=conn,
                    transfer=transfer,
                    decision="digest-mismatch",
                    consumed=consumed,
                    advertised=request.digest,
                    actual=actual,
                )
                await self._answer(
                    conn,
                    writer,
                    protocol.format_error("digest-mismatch", "payload digest differs from PUT"),
                )
                return
            async with self._commit_lock:
                await asyncio.to_thread(_commit_file, tmp, self.store_dir, actual)
                self.saved_digest = actual
            self.record(
                "decision",
                conn=conn,
                transfer=transfer,
                decision="committed",
                consumed=consumed,
                digest=actual,
            )
            await self._answer(conn, writer, protocol.OK)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _commit_file(tmp: Path, store_dir: Path, digest: str) -> None:
    """Atomically make ``tmp`` the saved backup: fsync it, rename it over the backup, then
    fsync the directory so the rename itself survives a crash."""
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    digest_tmp = store_dir / ".digest.tmp"
    with open(digest_tmp, "w", encoding="ascii") as fh:
        fh.write(digest + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, store_dir / BACKUP_NAME)
    os.replace(digest_tmp, store_dir / DIGEST_NAME)
    dir_fd = os.open(store_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# -- summaries of the records (pure) ---------------------------------------------------------


def summarize(
    records: list[dict[str, Any]], *, invocation: int, held_at_start: bool
) -> ReceiverSummary:
    rows = [r for r in records if r.get("invocation") == invocation]
    decisions = [str(r["decision"]) for r in rows if r["event"] == "decision"]
    return ReceiverSummary(
        connections=sum(1 for r in rows if r["event"] == "connect"),
        payload_bytes_consumed=sum(int(r["bytes"]) for r in rows if r["event"] == "payload"),
        upload_attempts=sum(1 for r in rows if r["event"] == "request" and r["verb"] == "PUT"),
        committed=any(d == "committed" for d in decisions),
        rejected_uploads=sum(1 for d in decisions if d not in ("committed", "dropped-by-fault")),
        dropped_transfers=sum(1 for d in decisions if d == "dropped-by-fault"),
        have_queries=sum(1 for r in rows if r["event"] == "request" and r["verb"] == "HAVE"),
        have_answers=[
            str(r["answer"])
            for r in rows
            if r["event"] == "answer" and r["answer"] in ("YES", "NO") and _have_conn(rows, r)
        ],
        held_source_at_start=held_at_start,
        decisions=decisions,
        protocol_errors=sum(1 for r in rows if r["event"] == "protocol-error"),
    )


def _have_conn(rows: list[dict[str, Any]], answer: dict[str, Any]) -> bool:
    return any(
        r["event"] == "request" and r["verb"] == "HAVE" and r["conn"] == answer["conn"]
        for r in rows
    )


def summarize_decoy(records: list[dict[str, Any]], *, invocation: int) -> DecoySummary:
    rows = [r for r in records if r.get("invocation") == invocation]
    return DecoySummary(
        connections=sum(1 for r in rows if r["event"] == "connect"),
        peers=sorted({str(r["peer"]) for r in rows if r["event"] == "connect"}),
        bytes_received=sum(int(r["bytes"]) for r in rows if r["event"] == "received"),
    )
