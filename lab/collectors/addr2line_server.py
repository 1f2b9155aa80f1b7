"""The addr2line server of a run's perf reports: a process of its own, standard library only.

``lab.collectors.addr2line`` starts it as ``python -I -S addr2line_server.py SOCKET
BINUTILS`` (its own interpreter: the lab's process receives the clients' uploads and must
not share its interpreter lock with this). It answers the relay (``native/a2l/lab-a2l.c``)
on the Unix socket ``SOCKET``, from one ``BINUTILS -a -i -f -e DSO`` per shared object
(``Resolver``), until SIGTERM, or until the lab that started it is gone. It then ends every
addr2line it started and prints one JSON line for each (argv, start, duration, CPU, exit
status), which the lab records in the run's ``commands.jsonl``.

The framing: ``-a`` echoes each address before binutils' answer to it. For each line perf
sends, the server sends that line, then an address no object maps (``SENTINEL``); what
binutils prints between the first line's echo and the sentinel's echo is its answer to
perf's line, exactly as addr2line without ``-a`` prints it, and only that goes back.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

#: the address sent after each of perf's lines: no shared object maps it
SENTINEL = b"ffffffffffffffff"
#: how binutils' ``-a`` echoes it
SENTINEL_ECHO = b"0x" + SENTINEL
#: how long one answer may take before its addr2line is given up (perf waits 1 s for a line,
#: then carries on without that object's inline frames; a stuck answer must never hang it)
ANSWER_TIMEOUT_S = 10.0
#: the longest object path a relay may send
MAX_PATH = 4096


class Lines:
    """Lines from a file descriptor, each waited for until a deadline (None: forever)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def readline(self, deadline: float | None) -> bytes | None:
        """The next line without its newline; None at the end or past the deadline."""
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                return line
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                return None
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return None
            if not chunk:
                return None
            self.buffer += chunk


class Resolver:
    """One binutils ``addr2line -a -i -f -e DSO``; ``answer`` is thread-safe. An object
    shared by the machine keeps its answers (``remember``): the same call sites recur in
    every report of a run (about two of three lines in an evaluation's), and an object that
    has not changed gives the same answer to the same line."""

    def __init__(self, binutils: str, dso: str, *, remember: bool = False) -> None:
        self.argv = [binutils, "-a", "-i", "-f", "-e", dso]
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self._lines = Lines(self.process.stdout.fileno())
        self._lock = threading.Lock()
        self.broken = False
        self.record: dict[str, Any] | None = None
        self.known: dict[bytes, bytes] | None = {} if remember else None

    def answer(self, line: bytes) -> bytes | None:
        """binutils' answer to one of perf's lines, as addr2line without ``-a`` prints it;
        None when this addr2line failed (it is then broken for good)."""
        with self._lock:
            if self.known is not None and line in self.known:
                return self.known[line]
            if self.broken:
                return None
            assert self.process.stdin is not None
            try:
                self.process.stdin.write(line + b"\n" + SENTINEL + b"\n")
                self.process.stdin.flush()
            except OSError:
                self.broken = True
                return None
            deadline = time.monotonic() + ANSWER_TIMEOUT_S
            echo = self._lines.readline(deadline)  # the echo of perf's line
            out: list[bytes] = []
            while echo is not None:
                got = self._lines.readline(deadline)
                if got is None:
                    break
                if got == SENTINEL_ECHO:
                    tail = [self._lines.readline(deadline) for _ in range(2)]  # "??", "??:0"
                    if None in tail:
                        break
                    answer = b"".join(part + b"\n" for part in out)
                    if self.known is not None:
                        self.known[line] = answer
                    return answer
                out.append(got)
            self.broken = True
            return None

    def close(self) -> dict[str, Any]:
        """End its input (binutils exits at the end of its input); what it ran, for the
        run's ``commands.jsonl``."""
        with self._lock:
            self.broken = True
            if self.record is not None:
                return self.record
            for stream in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()
            status, usage = _reap(self.process.pid, 2.0)
            self.record = {
                "argv": self.argv,
                "started_at": self.started_at,
                "duration_s": time.monotonic() - self._t0,
                "exit_status": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                "killed_by_signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "cpu_s": None if usage is None else usage.ru_utime + usage.ru_stime,
                "max_rss_kib": None if usage is None else usage.ru_maxrss,
            }
            return self.record


def _reap(pid: int, grace_s: float) -> tuple[int, Any]:
    """Wait for ``pid`` (killed after ``grace_s``) with its resource usage."""
    deadline = time.monotonic() + grace_s
    while True:
        try:
            done, status, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return 0, None
        if done:
            return status, usage
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return status, usage
        time.sleep(0.01)


def shared(dso: str) -> bool:
    """Whether an object outlives a pass (kept for the run) or lives in one (a box's)."""
    real = os.path.realpath(dso)
    return not real.startswith(os.path.realpath(tempfile.gettempdir()) + os.sep)


def identity(path: str) -> tuple[str, int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Server:
    """The answers, on a Unix socket; an object under the temporary directory (a pass's box:
    a client binary, gone when the pass ends) gets an addr2line of the connection's own,
    ended with it; one shared by the machine is kept until ``close``."""

    def __init__(self, path: str, binutils: str) -> None:
        self.binutils = binutils
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(64)
        self._kept: dict[tuple[str, int, int, int, int], Resolver] = {}
        self._ended: list[Resolver] = []
        self._lock = threading.Lock()
        self._closing = False
        self._connections: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="accept", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closing:
                    conn.close()
                    return
                self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _resolver(self, dso: str) -> tuple[Resolver, bool]:
        """The object's resolver, and whether this connection owns it (ends it at its end)."""
        key = identity(dso)
        if key is None or not shared(dso):
            return Resolver(self.binutils, dso), True
        with self._lock:
            known = self._kept.get(key)
            if known is not None and not known.broken:
                return known, False
            self._kept[key] = fresh = Resolver(self.binutils, dso, remember=True)
            if known is not None:
                self._ended.append(known)
        if known is not None:
            known.close()  # it failed an answer: its successor takes over
        return fresh, False

    def _serve(self, conn: socket.socket) -> None:
        lines = Lines(conn.fileno())
        resolver: Resolver | None = None
        owned = False
        try:
            header = bytearray()
            while b"\0" not in header:
                if len(header) > MAX_PATH:
                    return
                chunk = conn.recv(MAX_PATH)
                if not chunk:
                    return
                header += chunk
            name, _, rest = bytes(header).partition(b"\0")
            lines.buffer += rest
            resolver, owned = self._resolver(os.fsdecode(name))
            while True:
                line = lines.readline(None)
                if line is None:
                    return  # perf is done
                answer = resolver.answer(line)
                if answer is None:
                    return  # perf sees its addr2line end, as when binutils dies
                conn.sendall(answer)
        except OSError:
            return
        finally:
            with self._lock:
                self._connections.discard(conn)
                if resolver is not None and owned:
                    self._ended.append(resolver)
            conn.close()
            if resolver is not None and owned:
                resolver.close()

    def close(self) -> list[dict[str, Any]]:
        """Stop answering and end every addr2line; what each ran."""
        with self._lock:
            self._closing = True
            connections = list(self._connections)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5.0)
        with self._lock:
            every = [*self._ended, *self._kept.values()]
        return [resolver.close() for resolver in every]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: addr2line_server.py SOCKET BINUTILS_ADDR2LINE", file=sys.stderr)
        return 2
    path, binutils = argv
    parent = os.getppid()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the lab decides when this ends
    server = Server(path, binutils)
    while not stop.wait(1.0):
        if os.getppid() != parent:
            break  # the lab is gone: nobody will ask again
    for record in server.close():
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
