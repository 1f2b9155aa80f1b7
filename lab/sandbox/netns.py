"""A network namespace per pass (iproute2 ``ip netns``): the receiver, the decoy and the
client share it, it has only a loopback interface and no route out, and the packet capture
runs inside it on every interface with no port filter.

The receiver and the decoy live in the lab's own process; their listening sockets are made
*inside* the namespace by a small C helper (``native/listen/lab-listen.c``,
``lab.sandbox.helpers.LISTEN``) started with ``nsenter --net`` and handed back over a Unix
socket (``SCM_RIGHTS``), so connections from the client arrive in the namespace while the
endpoints' code and records stay in the lab.

    with NetworkNamespace.created("lab-4242-3", log=log) as ns:
        receiver_sock, decoy_sock = ns.listening_sockets(2)
        argv = [*ns.enter_argv(), "bwrap", ...]      # the client's sandbox starts here
        tcpdump = [*ns.enter_argv(), "tcpdump", "-i", "any", ...]
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

from lab.errors import SandboxError
from lab.host import procs
from lab.sandbox.helpers import LISTEN

NETNS_DIR = Path("/run/netns")
_NAME = re.compile(r"^lab-(?P<pid>\d+)-[a-z0-9-]+$")


def name_for(tag: str) -> str:
    """A namespace name carrying this lab process's pid, so that a later lab can tell a
    namespace a killed lab left behind from one another live lab is using."""
    safe = re.sub(r"[^a-z0-9-]", "-", tag.lower())[:40].strip("-") or "pass"
    return f"lab-{os.getpid()}-{safe}"


class NetworkNamespace:
    def __init__(self, name: str, *, log: procs.CommandLog | None = None) -> None:
        if not _NAME.match(name) or len(name) > 60:
            raise SandboxError(f"network namespace name {name!r} is not a lab name (a lab bug).")
        self.name = name
        self.log = log

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def enter_argv(self) -> list[str]:
        """The prefix that runs a command inside this namespace (util-linux nsenter)."""
        return [procs.which("nsenter") or "nsenter", f"--net={self.path}", "--"]

    def _ip(self, *args: str, purpose: str) -> None:
        try:
            procs.run(
                ["ip", *args], purpose=purpose, log=self.log, tool="ip", timeout=30, capture=True
            )
        except procs.CommandFailed as exc:
            raise SandboxError(
                f"the network namespace {self.name} could not be set up ({exc}); the sandbox "
                "needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN (python -m lab doctor)."
            ) from exc

    def create(self) -> None:
        self._ip("netns", "add", self.name, purpose="network namespace for one pass")
        self._ip("-n", self.name, "link", "set", "lo", "up", purpose="loopback up in the namespace")

    def delete(self) -> None:
        # whether the namespace exists is read from its path, not from whether the lab heard
        # `ip netns add` succeed: an add stopped by a signal (SIGTERM stops every process the
        # lab started) may have made it before it died (measured in CI)
        if self.path.exists():
            with contextlib.suppress(SandboxError):
                self._ip("netns", "delete", self.name, purpose="remove the pass's namespace")

    @classmethod
    @contextlib.contextmanager
    def created(
        cls, name: str, *, log: procs.CommandLog | None = None
    ) -> Iterator[NetworkNamespace]:
        ns = cls(name, log=log)
        try:
            ns.create()
            yield ns
        finally:
            ns.delete()

    def add_address(self, host: str) -> None:
        """Give the namespace's loopback ``host`` too (an endpoint that must answer at its
        own, non-loopback address inside the namespace)."""
        if not host.startswith("127."):
            self._ip(
                "-n", self.name, "addr", "add", f"{host}/32", "dev", "lo",
                purpose="an allowed endpoint's address inside the namespace",
            )  # fmt: skip

    def listening_sockets(
        self, count: int, *, at: list[tuple[str, int]] | None = None
    ) -> list[socket.socket]:
        """``count`` TCP sockets listening on 127.0.0.1 (ephemeral ports) inside this
        namespace, for the receiver and the decoy; or one at each address of ``at``."""
        addresses = at if at is not None else [("127.0.0.1", 0)] * count
        count = len(addresses)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            argv = [
                *self.enter_argv(),
                str(LISTEN.path()),
                str(theirs.fileno()),
                *(f"{host}:{port}" for host, port in addresses),
            ]
            try:
                procs.run(
                    argv,
                    purpose="listening sockets inside the pass's namespace",
                    log=self.log,
                    tool="nsenter",
                    timeout=30,
                    capture=True,
                    pass_fds=[theirs.fileno()],
                )
            except procs.CommandFailed as exc:
                raise SandboxError(
                    f"no listening socket could be made inside {self.name} ({exc})."
                ) from exc
            theirs.close()
            ours.settimeout(10)
            _, fds, _, _ = socket.recv_fds(ours, 16, count)
        finally:
            ours.close()
            theirs.close()
        if len(fds) != count:
            for fd in fds:
                os.close(fd)
            raise SandboxError(f"the socket helper in {self.name} returned {len(fds)} sockets.")
        return [socket.socket(fileno=fd) for fd in fds]


def sweep_stale(log: procs.CommandLog | None = None) -> list[str]:
    """Delete lab namespaces whose lab process is gone (a killed run); return their names."""
    removed: list[str] = []
    if not NETNS_DIR.is_dir():
        return removed
    for entry in sorted(NETNS_DIR.iterdir()):
        m = _NAME.match(entry.name)
        if m is None or Path(f"/proc/{m.group('pid')}").exists():
            continue
        NetworkNamespace(entry.name, log=log).delete()
        removed.append(entry.name)
    return removed
