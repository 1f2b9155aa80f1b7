"""What the receiver and the decoy share: a TCP listener on an asyncio loop in a background
thread, bounded connections with deadlines, and JSON-line records streamed to disk
(``lab.workloads.backup.records``). A subclass only says how to ``handle`` one connection.

    class Echo(Endpoint):
        role = "echo"
        async def handle(self, conn, sock, deadline):   # True resets instead of closing
            data = await asyncio.get_running_loop().sock_recv(sock, 64)
            self.record("received", conn=conn, bytes=len(data))
            return False

    endpoint = Echo(records_path, Limits(max_connections=16))
    endpoint.start()                    # returns once the loop is serving endpoint.address
    endpoint.wait_idle()                # every connection handled: the records are complete
    endpoint.stop()

Idle or trickling connections cost a socket and no thread; the connection cap follows the
file descriptors this process can really hold, so a flood meets ``ERR busy``, not a failing
accept.
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
from lab.workloads.backup import protocol
from lab.workloads.backup.records import Record, RecordLog

#: file descriptors kept for everything but connections (records, store, tracers' pipes)
FD_RESERVE = 256


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


class Endpoint:
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


#: how many passes (each a receiver and a decoy) this process serves at once (``--jobs``:
#: ``passes_at_once``); every endpoint's share of the file descriptors is counted with it
_PASSES_AT_ONCE = [1]


def passes_at_once(count: int) -> None:
    """Say how many passes may serve their endpoints at once in this process, so that a
    flood in one pass meets ``ERR busy`` before it takes the descriptors another needs."""
    _PASSES_AT_ONCE[0] = max(1, count)


def _connection_cap(wanted: int) -> int:
    """How many connections this process can really hold open for one endpoint: the soft
    RLIMIT_NOFILE is raised toward the hard one when it is too low (1,024 is a common soft
    limit), and what cannot be had lowers the cap, so a flood meets ``ERR busy``, not a
    failing accept; the descriptors are shared by both endpoints of every pass at once."""
    endpoints = 2 * _PASSES_AT_ONCE[0]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = endpoints * wanted + FD_RESERVE  # every endpoint at once, and the lab's own files
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (soft - FD_RESERVE) // endpoints))


def _close(sock: socket.socket, *, reset: bool) -> None:
    with contextlib.suppress(OSError):
        if reset:  # SO_LINGER 0: the close sends an RST, as an injected fault must
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
