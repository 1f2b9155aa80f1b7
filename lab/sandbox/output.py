"""A client's stdout or stderr, read from a pipe with a bounded cost: the head and the tail
are kept (in the evidence file and in memory), the middle is counted, never stored.

A client that prints two million lines costs the lab two small buffers, not gigabytes: the
completion event the contract needs is the last line, so the tail is what matters most;
the head shows how it started. Lines are never cut: the kept head ends at a line break and
the kept tail starts after one, and one marker line written by the lab (``MARKER_PREFIX``)
says how much was omitted between them.

    stream = CappedStream(read_fd, Path("client.stdout"), head=1 << 20, tail=1 << 20)
    stream.start()            # a thread drains the pipe until EOF
    ...
    stream.join()             # after the writer side is closed everywhere
    stream.total_bytes, stream.omitted_bytes, stream.total_lines
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the first bytes of the line the lab inserts where output was omitted
MARKER_PREFIX = b"\xe2\x80\xa6lab: "
#: default bounds per stream (1 MiB each): part of the frozen evaluation id
DEFAULT_HEAD = 1 << 20
DEFAULT_TAIL = 1 << 20
_CHUNK = 64 * 1024
#: lines whose arrival time is kept: the first and the last this many
LINES_TIMED = 100
#: bytes of each timed line kept with its time
LINE_KEPT = 1024

#: (line number from 0, CLOCK_MONOTONIC ns when the lab read it, its first bytes)
TimedLine = tuple[int, int, bytes]


@dataclass(frozen=True)
class StreamRecord:
    """What was kept of one stream, for results.json."""

    total_bytes: int
    total_lines: int
    kept_bytes: int
    omitted_bytes: int
    omitted_lines: int
    #: when the lab read each of the first and the last LINES_TIMED lines (not in
    #: results.json: the timeline holds them)
    line_times: tuple[TimedLine, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_bytes": self.total_bytes,
            "total_lines": self.total_lines,
            "kept_bytes": self.kept_bytes,
            "omitted_bytes": self.omitted_bytes,
            "omitted_lines": self.omitted_lines,
        }


class CappedStream:
    def __init__(
        self,
        fd: int,
        path: Path,
        *,
        head: int = DEFAULT_HEAD,
        tail: int = DEFAULT_TAIL,
        echo: Callable[[bytes], None] | None = None,
    ):
        self.fd = fd
        #: called with every chunk as it arrives (an agent's output streamed live)
        self.echo = echo
        self.path = path
        self.head_limit = head
        self.tail_limit = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0
        self.total_lines = 0
        self._line = bytearray()
        self._timed_head: list[TimedLine] = []
        self._timed_tail: deque[TimedLine] = deque(maxlen=LINES_TIMED)
        self._thread = threading.Thread(target=self._drain, name=f"output {path.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _drain(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self.fd, _CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                self._time_lines(chunk, time.monotonic_ns())
                self._take(chunk)
        finally:
            os.close(self.fd)

    def _time_lines(self, chunk: bytes, now: int) -> None:
        """Stamp every line this chunk completes with the time it was read (bounded: the
        first and the last LINES_TIMED lines are kept)."""
        pieces = chunk.split(b"\n")
        complete = len(pieces) - 1
        number = self.total_lines
        for i, piece in enumerate(pieces[:-1]):
            head_full = len(self._timed_head) >= LINES_TIMED
            if head_full and i < complete - LINES_TIMED:
                self._line.clear()
                continue  # an earlier line of a flood: only the last ones can be kept
            self._line += piece[: max(0, LINE_KEPT - len(self._line))]
            line = (number + i, now, bytes(self._line))
            (self._timed_tail.append if head_full else self._timed_head.append)(line)
            self._line.clear()
        self._line += pieces[-1][: max(0, LINE_KEPT - len(self._line))]

    def _take(self, chunk: bytes) -> None:
        if self.echo is not None:
            self.echo(chunk)
        self.total_bytes += len(chunk)
        self.total_lines += chunk.count(b"\n")
        room = self.head_limit - len(self._head)
        if room > 0 and not self._tail:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            if len(self._tail) > 2 * self.tail_limit:
                del self._tail[: len(self._tail) - self.tail_limit]

    def join(self, timeout: float | None = None) -> StreamRecord:
        self._thread.join(timeout)
        head, tail = bytes(self._head), bytes(self._tail)
        if len(tail) > self.tail_limit:
            tail = tail[len(tail) - self.tail_limit :]
        omitted = self.total_bytes - len(head) - len(tail)
        if omitted > 0:
            # keep whole lines: the head up to its last line break, the tail after its first
            cut = head.rfind(b"\n") + 1
            if cut > 0:
                omitted += len(head) - cut
                head = head[:cut]
            nl = tail.find(b"\n")
            if nl >= 0:
                omitted += nl + 1
                tail = tail[nl + 1 :]
        kept_lines = head.count(b"\n") + tail.count(b"\n")
        omitted_lines = max(0, self.total_lines - kept_lines) if omitted > 0 else 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "wb") as fh:
            fh.write(head)
            if omitted > 0:
                fh.write(
                    MARKER_PREFIX
                    + f"{omitted} bytes ({omitted_lines} lines) of output omitted here; kept "
                    f"the first {len(head)} and the last {len(tail)} bytes\n".encode()
                )
            fh.write(tail)
        return StreamRecord(
            total_bytes=self.total_bytes,
            total_lines=self.total_lines,
            kept_bytes=len(head) + len(tail),
            omitted_bytes=max(0, omitted),
            omitted_lines=omitted_lines,
            line_times=(*self._timed_head, *self._timed_tail),
        )
