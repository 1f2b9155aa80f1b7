"""The receiver and the decoy: TCP endpoints that keep their own records.

The receiver speaks wire protocol v1 (``docs/protocol.md``). It never trusts an advertised
digest: every upload is hashed while it is consumed and only a payload whose SHA-256 equals
the advertised one is committed, by one atomic rename (``lab.run.store``), so a rejected or
interrupted upload never replaces or damages the saved backup. Every connection, request,
answer, decision and consumed payload byte is recorded as a JSON line, streamed to disk.

    with Receiver.serving(store_dir, records_path, faults=[Fault(transfer=1, drop_after=65536)])
        as receiver:
        receiver.invocation = 1
        ...  # run the client against receiver.address
        receiver.wait_idle()
        summary = receiver.summary(1, held_at_start=False)   # from in-memory tallies
    saved_backup(store_dir)                                  # what the backup check reads

Each endpoint runs an asyncio loop in a background thread (accepting, reading request lines,
answering, with deadlines), so the runner stays synchronous and idle or trickling connections
cost no thread. A payload is consumed by a thread of its own (``lab.run.upload``): blocking
``recv_into`` and hashing overlap on two cores. Pass ``sock=`` to serve on a socket that is
already bound and listening (e.g. inside a network namespace); the endpoint then owns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.host.clock import now_rfc3339
from lab.model import DecoySummary, ReceiverSummary
from lab.run import protocol, upload
from lab.run.records import Record, RecordLog, summarize, summarize_decoy
from lab.run.store import BACKUP_NAME, Store, saved_backup

__all__ = [
    "BACKUP_NAME",
    "Decoy",
    "Fault",
    "Limits",
    "Receiver",
    "saved_backup",
    "summarize",
    "summarize_decoy",
]

#: seconds to hand an answer line (at most 256 bytes) to a client that does not read
ANSWER_TIMEOUT = 5.0
#: the decoy records at most this much of what a connection sends
DECOY_KEEP = 64 * 1024
#: seconds the decoy waits for more bytes before recording what it got
DECOY_IDLE = 2.0
#: file descriptors kept for everything but connections (records, store, tracers' pipes)
FD_RESERVE = 256


@dataclass(frozen=True)
class Fault:
    """Drop the connection after ``drop_after`` payload bytes of the ``transfer``-th PUT
    (counted from 1 over the receiver's whole life, i.e. over every invocation of a pass)."""

    transfer: int
    drop_after: int


@dataclass(frozen=True)
class Limits:
    """Bounds on what one client can make the receiver do (docs/protocol.md)."""

    max_size: int = protocol.DEFAULT_MAX_SIZE
    #: seconds from the connection until the request line must be complete
    header_timeout: float = 10.0
    #: seconds without any payload byte before the upload is abandoned
    stall_timeout: float = 10.0
    #: seconds from the connection until the whole request (line and payload) must be in;
    #: without it a client trickling a byte just inside the stall timeout holds a slot forever
    request_deadline: float = 120.0
    #: open connections; one more is answered ``ERR busy`` and closed. Idle connections cost
    #: a socket and no thread, so this is bounded by file descriptors, not by threads
    max_connections: int = 1024
    #: payloads being received at once (a thread and up to 4 MiB of buffers each); one more
    #: PUT is answered ``ERR busy`` before its payload is read
    max_uploads: int = 64


class _Endpoint:
    """A TCP listener on its own event loop thread, with JSON-line records."""

    role = "endpoint"

    def __init__(
        self, records_path: Path, limits: Limits, *, sock: socket.socket | None = None
    ) -> None:
        self.records_path = records_path
        self.limits = limits
        self.invocation = 0
        self._log = RecordLog(records_path, track_peers=self.role == "decoy")
        self._listener = sock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._startup_error: BaseException | None = None
        self._conn_seq = 0
        self._active = 0
        self._idle = threading.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._cap = limits.max_connections
        self.port = 0
        self.host = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    # -- records ---------------------------------------------------------------------------

    def record(self, event: str, **fields: Any) -> None:
        self._log.write(
            {
                "ts": now_rfc3339(),
                "clock": "realtime",
                "mono_ns": time.monotonic_ns(),
                "source": self.role,
                "invocation": self.invocation,
                "event": event,
                **fields,
            }
        )

    @property
    def records(self) -> list[Record]:
        """Every record of this endpoint's life, read back from its JSON-lines file."""
        return list(self._log.read())

    def records_for(self, invocation: int) -> list[Record]:
        return list(self._log.read(invocation))

    def iter_records(self, invocation: int | None = None) -> Iterator[Record]:
        """The records streamed from disk, without holding them all in memory."""
        return self._log.read(invocation)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", 0))
            listener.listen(1024)
            self._listener = listener
        elif not self._listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise ValueError(f"the {self.role}'s socket is not listening; call listen() first")
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()[:2]
        self._thread = threading.Thread(target=self._run, name=self.role, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._startup_error is not None:
            raise self._startup_error
        if not self._ready.is_set():
            raise RuntimeError(f"the {self.role} did not start serving within 10 s")

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._cap = _connection_cap(self.limits.max_connections)
            accepting = loop.create_task(self._accept_forever())
            self.record("listening", address=self.address, max_connections=self._cap)
        except BaseException as exc:  # reported to start(), never lost
            self._startup_error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        accepting.cancel()
        loop.run_until_complete(self._shutdown(accepting))
        loop.close()

    async def _shutdown(self, accepting: asyncio.Task[None]) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await accepting
        assert self._listener is not None
        self._listener.close()
        self._abort_uploads()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _abort_uploads(self) -> None:
        """Wake every thread blocked on a payload (overridden by the receiver)."""

    def stop(self) -> None:
        self._stopping.set()
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._log.close()

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no connection is being handled (records of an invocation complete)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._active == 0, timeout)

    # -- connections -----------------------------------------------------------------------

    async def _accept_forever(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._listener is not None
        while True:
            try:
                sock, peer = await loop.sock_accept(self._listener)
            except OSError as exc:  # EMFILE and friends: record, let the flood pass, go on
                self.record("accept-error", error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.05)
                continue
            with self._idle:  # counted from the accept, so wait_idle cannot miss it
                self._active += 1
                admitted = self._active <= self._cap
            deadline = time.monotonic() + self.limits.request_deadline
            task = loop.create_task(self._connection(sock, peer, admitted, deadline))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connection(
        self, sock: socket.socket, peer: Any, admitted: bool, deadline: float
    ) -> None:
        self._conn_seq += 1
        conn = self._conn_seq
        peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.record("connect", conn=conn, peer=peer_text)
        reset = False
        try:
            if admitted:
                reset = await self.handle(conn, sock, deadline)
            else:
                await self.refuse(conn, sock, "too many connections; try again later")
        except asyncio.CancelledError:
            self.record("aborted", conn=conn, why="receiver shutting down")
        except OSError as exc:
            self.record("connection-error", conn=conn, error=type(exc).__name__)
        except Exception as exc:  # never crash the endpoint; keep the evidence
            self.record("internal-error", conn=conn, error=f"{type(exc).__name__}: {exc}")
        finally:
            _close(sock, reset=reset)
            self.record("close", conn=conn, reset=reset)
            with self._idle:
                self._active -= 1
                self._idle.notify_all()

    async def refuse(self, conn: int, sock: socket.socket, why: str) -> None:
        self.record("refused", conn=conn, why=why)

    async def handle(self, conn: int, sock: socket.socket, deadline: float) -> bool:
        """Serve one connection; True closes it with a reset instead of an orderly close."""
        raise NotImplementedError


def _connection_cap(wanted: int) -> int:
    """How many connections this process can really hold open: the soft RLIMIT_NOFILE is
    raised toward the hard one when it is too low (1,024 is a common soft limit), and what
    cannot be had lowers the cap, so a flood meets ``ERR busy``, not a failing accept."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * wanted + FD_RESERVE  # both endpoints of a pass, and the lab's own files
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (soft - FD_RESERVE) // 2))


def _close(sock: socket.socket, *, reset: bool) -> None:
    with contextlib.suppress(OSError):
        if reset:  # SO_LINGER 0: the close sends an RST, as an injected fault must
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


class Decoy(_Endpoint):
    """A second endpoint that records anything that connects to it, and answers nothing."""

    role = "decoy"

    def __init__(
        self,
        records_path: Path,
        limits: Limits | None = None,
        *,
        sock: socket.socket | None = None,
    ) -> None:
        super().__init__(records_path, limits or Limits(), sock=sock)

    def summary(self, invocation: int) -> DecoySummary:
        return self._log.decoy_summary(invocation)

    async def handle(self, conn: int, sock: socket.socket, deadline: float) -> bool:
        loop = asyncio.get_running_loop()
        received = 0
        first = b""
        with contextlib.suppress(TimeoutError, ConnectionError):
            while received < DECOY_KEEP:
                wait = min(DECOY_IDLE, deadline - time.monotonic())
                if wait <= 0:
                    break
                async with asyncio.timeout(wait):
                    chunk = await loop.sock_recv(sock, 4096)
                if not chunk:
                    break
                if len(first) < 64:
                    first += chunk[: 64 - len(first)]
                received += len(chunk)
        self.record("received", conn=conn, bytes=received, first_bytes=first.hex())
        return False

    @classmethod
    @contextlib.contextmanager
    def serving(
        cls,
        records_path: Path,
        limits: Limits | None = None,
        *,
        sock: socket.socket | None = None,
    ) -> Iterator[Decoy]:
        decoy = cls(records_path, limits, sock=sock)
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
