"""Consuming one upload's payload: received, written and hashed as it arrives, on two threads.

    got = receive_payload(sock, fd, limit=size, first=b"...", stall_s=10.0, deadline=t)
    got.consumed, got.outcome, got.sha256   # outcome: "complete", "short-payload", ...

The calling thread receives with ``recv_into`` straight into preallocated buffers and writes
each full buffer to the temporary file with ``os.write``; a second thread hashes the same
buffers meanwhile (hashlib and the socket and file calls all release the GIL, so receiving
and hashing overlap on two cores). Nothing is copied in Python. The buffers are anonymous
memory maps: pages a slow or idle client never fills are never allocated.
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import queue
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

#: bytes per buffer: large enough that per-call overhead vanishes next to hashing and the
#: copies, small enough that four of them cost little (and only when filled)
CHUNK = 1 << 20
BUFFERS = 4

COMPLETE = "complete"  # ``limit`` bytes consumed (the whole payload, or a fault's share)
SHORT = "short-payload"  # the client closed its side first
STALLED = "timeout"  # no byte within the stall timeout
DEADLINE = "deadline"  # the request's total deadline passed
RESET = "connection-reset"  # the client reset the connection
STOPPED = "aborted"  # the receiver is shutting down
STORAGE = "internal"  # writing the temporary file failed


def _writeback_starter() -> Any:
    """``sync_file_range(fd, offset, n, SYNC_FILE_RANGE_WRITE)`` from the C library, or None.

    It starts writing a range to disk without waiting (Linux; Python has no binding). Started
    for each buffer as it is written, the writeback overlaps the receiving, and the commit's
    one fdatasync finds little left to do (measured: 64 MiB, fdatasync 20 ms -> 1 ms)."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE = _writeback_starter()
_SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>


@dataclass(frozen=True)
class Received:
    consumed: int
    outcome: str
    #: SHA-256 of the consumed bytes (the whole payload when ``outcome`` is complete)
    sha256: str
    error: str | None = None


def receive_payload(
    sock: socket.socket,
    fd: int,
    *,
    limit: int,
    first: bytes,
    stall_s: float,
    deadline: float,
    stop: threading.Event | None = None,
) -> Received:
    """Consume up to ``limit`` payload bytes (``first`` already read with the request line)
    from ``sock`` into ``fd``; ``deadline`` is a ``time.monotonic()`` instant."""
    size = max(1, min(CHUNK, limit))
    area = mmap.mmap(-1, size * BUFFERS)
    views = [memoryview(area)[i * size : (i + 1) * size] for i in range(BUFFERS)]
    digest = hashlib.sha256()
    free: queue.SimpleQueue[int] = queue.SimpleQueue()
    full: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
    for i in range(BUFFERS):
        free.put(i)

    def hash_buffers() -> None:
        while (item := full.get()) is not None:
            index, length = item
            digest.update(views[index][:length])
            free.put(index)

    hasher = threading.Thread(target=hash_buffers, name="upload-hash", daemon=True)
    hasher.start()
    consumed = 0
    outcome = COMPLETE
    error: str | None = None
    index = free.get()
    filled = min(len(first), limit)
    views[index][:filled] = first[:filled]
    consumed = filled
    try:
        while consumed < limit:
            if filled == size:
                _write(fd, views[index][:filled], consumed - filled)
                full.put((index, filled))
                index, filled = free.get(), 0
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome = DEADLINE
                break
            sock.settimeout(min(stall_s, remaining))
            want = min(size - filled, limit - consumed)
            try:
                got = sock.recv_into(views[index][filled : filled + want])
            except TimeoutError:
                outcome = DEADLINE if time.monotonic() >= deadline else STALLED
                break
            except ConnectionResetError:
                outcome = RESET
                break
            if got == 0:
                outcome = STOPPED if stop is not None and stop.is_set() else SHORT
                break
            filled += got
            consumed += got
        if filled:
            _write(fd, views[index][:filled], consumed - filled)
            full.put((index, filled))
    except OSError as exc:  # the file (disk full, I/O error) or the socket beyond a reset
        outcome = STOPPED if stop is not None and stop.is_set() else STORAGE
        if isinstance(exc, ConnectionError):
            outcome = RESET
        error = f"{type(exc).__name__}: {exc}"
    finally:
        full.put(None)
        hasher.join()
        for view in views:
            view.release()
        area.close()
    return Received(consumed=consumed, outcome=outcome, sha256=digest.hexdigest(), error=error)


def _write(fd: int, view: memoryview, offset: int) -> None:
    length = len(view)
    while view:
        view = view[os.write(fd, view) :]
    if _SYNC_FILE_RANGE is not None:
        _SYNC_FILE_RANGE(fd, offset, length, _SYNC_FILE_RANGE_WRITE)  # a hint: errors ignored
