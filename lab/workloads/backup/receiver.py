"""The receiver: the loopback TCP endpoint the client backs up to, keeping its own records.

The receiver speaks wire protocol v1 (``docs/protocol.md``). It never trusts an advertised
digest: every upload is hashed while it is consumed and only a payload whose SHA-256 equals the
advertised one is committed, by one atomic rename (``lab.workloads.backup.store``), so a
rejected or interrupted upload never replaces or damages the saved backup. Every connection,
request, answer, decision and consumed payload byte is recorded as a JSON line, streamed to
disk.

    with Receiver.serving(store_dir, records_path, faults=[Fault(transfer=1, drop_after=65536)])
        as receiver:
        receiver.invocation = 1
        ...  # run the client against receiver.address
        receiver.wait_idle()
        summary = receiver.summary(1, held_at_start=False)   # from in-memory tallies
    saved_backup(store_dir)                                  # what the backup check reads

Like the decoy (``lab.workloads.backup.decoy``), it runs an asyncio loop in a background thread
(``lab.workloads.backup.endpoint``: accepting, reading request lines, answering, with
deadlines), so the runner stays synchronous and idle or trickling connections cost no thread. A
payload is consumed by a thread of its own (``lab.workloads.backup.upload``): blocking
``recv_into`` and hashing overlap on two cores. Pass ``sock=`` to serve on a socket that is
already bound and listening (e.g. inside a network namespace); the endpoint then owns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.model import ReceiverSummary
from lab.workloads.backup import protocol, upload
from lab.workloads.backup.endpoint import Endpoint, Limits
from lab.workloads.backup.records import summarize, summarize_decoy
from lab.workloads.backup.store import BACKUP_NAME, Store, saved_backup

__all__ = [
    "BACKUP_NAME",
    "Fault",
    "Limits",
    "Receiver",
    "saved_backup",
    "summarize",
    "summarize_decoy",
]

#: seconds to hand an answer line (at most 256 bytes) to a client that does not read
ANSWER_TIMEOUT = 5.0


@dataclass(frozen=True)
class Fault:
    """Drop the connection after ``drop_after`` payload bytes of the ``transfer``-th PUT
    (counted from 1 over the receiver's whole life, i.e. over every invocation of a pass)."""

    transfer: int
    drop_after: int


class Receiver(Endpoint):
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
        super().__init__(records_path, limits or Limits(), sock=sock)
        self.store_dir = store_dir
        self.store = Store.open(store_dir)
        if self.store.removed:
            self.record(
                "store-cleaned",
                removed=self.store.removed,
                bytes=self.store.removed_bytes,
                why="temporary files of uploads interrupted before this receiver started",
            )
        self.faults = {f.transfer: f for f in faults or []}
        self.transfers = 0
        self._uploads: dict[int, socket.socket] = {}
        self._uploads_lock = threading.Lock()

    @property
    def saved_digest(self) -> str | None:
        """SHA-256 of the saved backup (hashed from the file at start, then each commit's)."""
        return self.store.digest

    def summary(self, invocation: int, *, held_at_start: bool) -> ReceiverSummary:
        """What the records of ``invocation`` say, from tallies kept as they were written."""
        return self._log.receiver_summary(invocation, held_at_start=held_at_start)

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
        digest = self.store.save(content)
        self.record("preloaded", digest=digest, size=len(content))
        return digest

    # -- the event loop side: request line, HAVE, admission of uploads ----------------------

    async def refuse(self, conn: int, sock: socket.socket, why: str) -> None:
        line = protocol.format_error("busy", why)
        self.record("refused", conn=conn, why=why, answer=line.decode("ascii").rstrip("\n"))
        await _send(sock, line)

    async def _answer(self, conn: int, sock: socket.socket, line: bytes) -> None:
        await _send(sock, line)
        self.record("answer", conn=conn, answer=line.decode("ascii").rstrip("\n"))

    async def _error(self, conn: int, sock: socket.socket, code: str, text: str) -> None:
        self.record("protocol-error", conn=conn, code=code, text=text)
        await self._answer(conn, sock, protocol.format_error(code, text))

    async def handle(self, conn: int, sock: socket.socket, deadline: float) -> bool:
        wait = min(self.limits.header_timeout, deadline - time.monotonic())
        try:
            async with asyncio.timeout(wait):
                line, first = await _read_line(sock)
        except TimeoutError:
            await self._error(conn, sock, "timeout", "no complete request line in time")
            return False
        except ConnectionError:
            self.record(
                "protocol-error",
                conn=conn,
                code="bad-request",
                text="connection reset before a complete request line",
            )
            return False
        if first is None:
            if len(line) > protocol.MAX_LINE:
                await self._error(conn, sock, "line-too-long", "request line too long")
            else:
                self.record(
                    "protocol-error",
                    conn=conn,
                    code="bad-request",
                    text="connection closed before a complete request line",
                    partial_bytes=len(line),
                )
            return False
        try:
            request = protocol.parse_request(line, max_size=self.limits.max_size)
        except protocol.ProtocolViolation as exc:
            await self._error(conn, sock, exc.code, exc.text)
            return False
        self.record(
            "request", conn=conn, verb=request.verb, digest=request.digest, size=request.size
        )
        if request.verb == "HAVE":
            answer = protocol.YES if request.digest == self.saved_digest else protocol.NO
            await self._answer(conn, sock, answer)
            return False
        self.transfers += 1
        transfer = self.transfers
        if len(self._uploads) >= self.limits.max_uploads:
            why = f"{self.limits.max_uploads} uploads in progress; try again later"
            self._decide(conn, transfer, "busy", 0, why=why)
            await self._answer(conn, sock, protocol.format_error("busy", why))
            return False
        with self._uploads_lock:
            self._uploads[conn] = sock
        try:
            return await _in_thread(self._put, conn, transfer, request, sock, first, deadline)
        finally:
            with self._uploads_lock:
                self._uploads.pop(conn, None)

    def _abort_uploads(self) -> None:
        with self._uploads_lock:
            for sock in self._uploads.values():
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    # -- the upload thread: payload, validation, commit, answer -----------------------------

    def _decide(self, conn: int, transfer: int, decision: str, consumed: int, **why: Any) -> None:
        self.record(
            "decision", conn=conn, transfer=transfer, decision=decision, consumed=consumed, **why
        )

    def _reply(self, conn: int, sock: socket.socket, line: bytes) -> None:
        with contextlib.suppress(OSError):
            sock.settimeout(ANSWER_TIMEOUT)
            sock.sendall(line)
        self.record("answer", conn=conn, answer=line.decode("ascii").rstrip("\n"))

    def _put(
        self,
        conn: int,
        transfer: int,
        request: protocol.Request,
        sock: socket.socket,
        first: bytes,
        deadline: float,
    ) -> bool:
        fault = self.faults.get(transfer)
        limit = request.size if fault is None else min(fault.drop_after, request.size)
        try:
            fd, tmp = self.store.new_upload(conn)
        except OSError as exc:  # the store itself is unusable: still one record per outcome
            self.record("payload", conn=conn, transfer=transfer, bytes=0, advertised=request.size)
            self._decide(conn, transfer, "internal", 0, why=f"no temporary file: {exc}")
            self._reply(conn, sock, protocol.format_error("internal", "the store is unusable"))
            return False
        try:
            got = upload.receive_payload(
                sock,
                fd,
                limit=limit,
                first=first,
                stall_s=self.limits.stall_timeout,
                deadline=deadline,
                stop=self._stopping,
            )
            self.record(
                "payload", conn=conn, transfer=transfer, bytes=got.consumed, advertised=request.size
            )
            return self._decide_upload(conn, transfer, request, sock, got, fd, tmp, fault)
        finally:
            self.store.discard(fd, tmp)

    def _decide_upload(
        self,
        conn: int,
        transfer: int,
        request: protocol.Request,
        sock: socket.socket,
        got: upload.Received,
        fd: int,
        tmp: Path,
        fault: Fault | None,
    ) -> bool:
        consumed = got.consumed
        if got.outcome == upload.COMPLETE and fault is not None and consumed < request.size:
            why = f"injected fault: drop after {fault.drop_after} payload bytes"
            self._decide(conn, transfer, "dropped-by-fault", consumed, why=why)
            return True
        if got.outcome != upload.COMPLETE:
            code, text = _FAILED[got.outcome]
            decision = "timeout" if got.outcome == upload.DEADLINE else got.outcome
            text = text.format(
                consumed=consumed, size=request.size, deadline=self.limits.request_deadline
            )
            self._decide(conn, transfer, decision, consumed, why=got.error or text)
            if code is not None:
                self._reply(conn, sock, protocol.format_error(code, text))
            return False
        if got.sha256 != request.digest:
            self._decide(
                conn,
                transfer,
                "digest-mismatch",
                consumed,
                advertised=request.digest,
                actual=got.sha256,
            )
            self._reply(
                conn, sock, protocol.format_error("digest-mismatch", "payload digest differs")
            )
            return False
        try:
            self.store.commit(fd, tmp, got.sha256)
        except OSError as exc:
            self._decide(conn, transfer, "internal", consumed, why=f"commit failed: {exc}")
            self._reply(conn, sock, protocol.format_error("internal", "the commit failed"))
            return False
        self._decide(conn, transfer, "committed", consumed, digest=got.sha256)
        self._reply(conn, sock, protocol.OK)
        return False


#: how an unfinished payload is answered: (ERR code or None for no answer, text)
_FAILED: dict[str, tuple[str | None, str]] = {
    upload.SHORT: ("short-payload", "payload ended after {consumed} of {size} bytes"),
    upload.STALLED: ("timeout", "payload stalled"),
    upload.DEADLINE: ("timeout", "request not complete within {deadline:g} s"),
    upload.RESET: (None, "the client reset the connection"),
    upload.STOPPED: (None, "receiver shutting down"),
    upload.STORAGE: ("internal", "the receiver could not store the payload"),
}


async def _read_line(sock: socket.socket) -> tuple[bytes, bytes | None]:
    """(request line, bytes after it) or (what came, None) at EOF or past the line limit.

    Reads at most one byte beyond the longest line, so at most 256 payload bytes come along."""
    loop = asyncio.get_running_loop()
    buf = b""
    while len(buf) <= protocol.MAX_LINE:
        data = await loop.sock_recv(sock, protocol.MAX_LINE + 1 - len(buf))
        if not data:
            return buf, None
        buf += data
        end = buf.find(b"\n")
        if end >= 0:
            return buf[: end + 1], buf[end + 1 :]
    return buf, None


async def _send(sock: socket.socket, line: bytes) -> None:
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError, TimeoutError):
        async with asyncio.timeout(ANSWER_TIMEOUT):
            await loop.sock_sendall(sock, line)


async def _in_thread(fn: Any, *args: Any) -> bool:
    """Run ``fn(*args)`` on a thread of its own (not the default executor, whose few workers
    would queue uploads behind each other) and await its result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[bool] = loop.create_future()

    def settle(result: bool | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(bool(result))

    def body() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # handed to the awaiting task, which records it
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(settle, result, error)

    thread = threading.Thread(target=body, name="upload", daemon=True)
    thread.start()
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        # shutting down: the socket was shut down, so the thread ends soon; it must end
        # before the socket is closed under it
        await asyncio.to_thread(thread.join, 10)
        raise
