"""The decoy: a second loopback endpoint, where no client should ever connect, that records
anything that does (bytes received, the first 64 of them) and answers nothing. Its records
are the evidence that a client contacted a destination it was not given.

    with Decoy.serving(records_path) as decoy:
        ...  # run the client, told only about the receiver
        decoy.wait_idle()
        decoy.summary(1)                # DecoySummary: connections, peers, bytes_received
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from lab.model import DecoySummary
from lab.workloads.backup.endpoint import Endpoint, Limits

#: the decoy records at most this much of what a connection sends
DECOY_KEEP = 64 * 1024
#: seconds the decoy waits for more bytes before recording what it got
DECOY_IDLE = 2.0


class Decoy(Endpoint):
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
