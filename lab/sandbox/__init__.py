"""The sandbox every client invocation runs in, seeded or candidate.

Built from kept tools, one module each: the dedicated user (``user``: useradd), cgroups
(``cgroup``: cgroup v2 files, v1 limit hierarchies on hybrid hosts), the network namespace
(``netns``: iproute2 ``ip netns``, util-linux ``nsenter``), the command line (``jail``:
bubblewrap, ``capsh``, ``prlimit``), bounded output (``output``) and the supervision of
one invocation (``supervise``). ``probe`` says which of them this machine offers.

    sandbox = Sandbox.open("run-…", limits=Limits(), log=log, masked=[key_path])
    with sandbox.pass_cell("baseline-r1-none", client=binary, invocations=2) as cell:
        cell.write_source(data)                      # read-only copy inside the box
        rx_sock, decoy_sock = cell.netns.listening_sockets(2)
        outcome = cell.run(1, client_argv, wrap=lambda argv: argv, timeout_s=60, ...)
    sandbox.close()

The pass's *box* holds the client binary and the source; the receiver's store sits beside
it in the same root-only scratch directory, and neither that directory nor anything else of
the lab is visible inside the sandbox.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import SandboxError
from lab.host import procs
from lab.sandbox import boxfs, seccomp
from lab.sandbox import netns as netns_mod
from lab.sandbox.cell import CLIENT_NAME, PassCell, Reservation
from lab.sandbox.cgroup import CgroupTree, Limits, RunGroup, opaque_name
from lab.sandbox.supervise import Outcome
from lab.sandbox.user import ClientUser

__all__ = [
    "Limits",
    "Outcome",
    "PassCell",
    "Reservation",
    "Sandbox",
    "SandboxSettings",
    "cell_dirs",
]


@dataclass(frozen=True)
class SandboxSettings:
    """Bounds of every invocation; all of them are part of the frozen evaluation id."""

    limits: Limits = field(default_factory=Limits)
    #: after the main process exits, how long processes it left may run on, observed,
    #: before the cgroup is killed (a daemon that sends at once is caught sending)
    linger_grace_s: float = 1.0
    #: bytes of each output stream kept at its start and at its end
    output_head: int = 1 << 20
    output_tail: int = 1 << 20

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.limits.to_dict(),
            # the system-call filter every invocation runs under (lab.sandbox.seccomp)
            "syscall_filter_sha256": seccomp.source_digest(),
            "linger_grace_s": self.linger_grace_s,
            "output_head_bytes": self.output_head,
            "output_tail_bytes": self.output_tail,
        }


class Sandbox:
    """Per run: the client user, the run's cgroup, the settings."""

    def __init__(
        self,
        *,
        user: ClientUser,
        run_group: RunGroup,
        settings: SandboxSettings,
        log: procs.CommandLog | None,
        masked: Sequence[Path] = (),
        filter_program: Path | None = None,
    ) -> None:
        self.user = user
        #: the users a pass cell may run its client as, one per pass that may run at once
        #: (``use_slots``): no two invocations that may overlap share a uid, so what the
        #: kernel reports by uid (the filter's refusals, RLIMIT_NPROC) is each one's own
        self.slot_users: list[ClientUser] = [user]
        self._free: queue.Queue[ClientUser] = queue.Queue()
        self._free.put(user)
        #: the built system-call filter every invocation runs under (lab.sandbox.seccomp)
        self.filter = filter_program or seccomp.helper()
        self.run_group = run_group
        self.settings = settings
        self.log = log
        self.masked = tuple(p.resolve() for p in masked)
        self._passes = 0
        # passes may open their cells from several threads (--jobs N): the counter that
        # makes each cell's namespace and cgroup names unique must not hand one out twice
        self._passes_lock = threading.Lock()
        #: client digest -> the run's one copy of it (see ``shared_client``)
        self._clients: dict[str, Path] = {}
        self._clients_dir: Path | None = None

    @classmethod
    def open(
        cls,
        run_id: str,
        *,
        settings: SandboxSettings | None = None,
        log: procs.CommandLog | None = None,
        masked: Sequence[Path] = (),
    ) -> Sandbox:
        """Create (or find) the client user and the run's cgroup; raises SandboxError
        naming the first thing this machine lacks."""
        settings = settings or SandboxSettings()
        for tool in ("bwrap", "capsh", "nsenter", "prlimit", "ip"):
            procs.require_tool(tool)
        user = ClientUser.ensure(log=log)
        _refuse_strays(user)
        netns_mod.sweep_stale(log)
        filter_program = seccomp.helper()  # SandboxError naming libseccomp-dev
        tree = CgroupTree.discover()
        group = tree.run_group(run_id, settings.limits)
        return cls(
            user=user,
            run_group=group,
            settings=settings,
            log=log,
            masked=masked,
            filter_program=filter_program,
        )

    def use_slots(self, count: int) -> None:
        """Make ``count`` client users available to pass cells (``lab-client``, then
        ``lab-client-2`` …, created like the first when missing, each refused if it runs a
        process); ``count`` passes may then run at once, each as a user of its own."""
        for number in range(len(self.slot_users) + 1, count + 1):
            user = ClientUser.ensure(f"{self.user.name}-{number}", log=self.log)
            _refuse_strays(user)
            self.slot_users.append(user)
            self._free.put(user)

    def lease(self) -> ClientUser:
        """A client user no running pass cell holds (waits for one when all are held)."""
        return self._free.get()

    def release(self, user: ClientUser) -> None:
        self._free.put(user)

    def close(self) -> None:
        self.run_group.remove()
        if self._clients_dir is not None:
            shutil.rmtree(self._clients_dir, ignore_errors=True)
            self._clients_dir = None
            self._clients.clear()

    def shared_client(self, client: Path) -> Path:
        """The run's one copy of ``client`` (root's, read-only), keyed by its SHA-256: every
        pass's box hard-links it, so every pass runs the same inode and a uprobe attached to
        this path once (a bpftrace session shared by several passes) fires in all of them.
        Copied, never linked to the original: a client rebuilt during the run gets a copy of
        its own."""
        data = client.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        with self._passes_lock:
            known = self._clients.get(digest)
            if known is not None:
                return known
            if self._clients_dir is None:
                self._clients_dir = Path(tempfile.mkdtemp(prefix="lab-clients-"))  # 0700
            path = self._clients_dir / f"{digest[:16]}-{CLIENT_NAME}"
            path.write_bytes(data)
            path.chmod(0o555)
            self._clients[digest] = path
            return path

    def reserve(self, tag: str, *, invocations: int) -> Reservation:
        """A pass's name and invocation cgroups made ahead of its cell, so that a session
        collector shared by several passes can be given every cgroup id before the first of
        them starts. Hand it to ``pass_cell``, which then owns (and removes) the groups;
        ``Reservation.release`` removes them if the pass never runs."""
        with self._passes_lock:
            self._passes += 1
            number = self._passes
        named = f"{number}-{tag}"
        reserved = Reservation(named, {})
        try:
            for index in range(1, invocations + 1):
                # opaque: the tag (a timing round's, say) never reaches /proc/self/cgroup
                reserved.groups[index] = self.run_group.invocation(opaque_name())
        except BaseException:
            reserved.release()
            raise
        return reserved

    def describe(self) -> dict[str, Any]:
        return {
            "enabled": True,
            "user": self.user.to_dict(),
            "slot_users": [u.to_dict() for u in self.slot_users],
            "settings": self.settings.to_dict(),
            "cgroup": str(self.run_group.v2),
            "limits": [e.to_dict() for e in self.run_group.enforcement],
            "tools": ["nsenter", "bwrap", "sh", "mount", "capsh", "lab-filter", "prlimit"],
            "syscall_filter": {
                "refused": sorted(set(seccomp.refused_calls(self.filter).values())),
                "action": "EPERM, each refusal logged by the kernel (SECCOMP_FILTER_FLAG_LOG)",
                "observer": seccomp.OBSERVER,
            },
        }

    def refusals(
        self, watch: seccomp.KmsgWatch, user: ClientUser | None = None
    ) -> seccomp.Refusals:
        """What the filter refused ``user`` (the client user) since ``watch`` was opened."""
        uid = (user or self.user).uid
        return watch.collect(uid=uid, names=seccomp.refused_calls(self.filter))

    def bounded(self, path: Path, user: ClientUser | None = None) -> None:
        """Make ``path`` (an empty directory) a bounded tmpfs owned by ``user`` (the client
        user)."""
        limits = self.settings.limits
        owner = user or self.user
        boxfs.mount_bounded(
            path,
            size=limits.disk_max,
            inodes=limits.disk_inodes_max,
            uid=owner.uid,
            gid=owner.gid,
            log=self.log,
        )

    def nproc_fallback(self) -> int | None:
        """RLIMIT_NPROC when no cgroup enforces the pids bound (per user, weaker)."""
        pids = next(e for e in self.run_group.enforcement if e.limit == "pids_max")
        return None if pids.mechanism is not None else self.settings.limits.pids_max

    @contextlib.contextmanager
    def pass_cell(
        self, tag: str, *, client: Path, invocations: int, reserved: Reservation | None = None
    ) -> Iterator[PassCell]:
        """A pass's cell, with the cgroups ``reserve`` made (here, or ahead by the caller)."""
        held = reserved if reserved is not None else self.reserve(tag, invocations=invocations)
        try:
            cell = PassCell(self, held, client=client)
        finally:
            held.release()  # a no-op once the cell took the groups over (it removes them)
        try:
            cell.open()
            yield cell
        finally:
            cell.close()


def cell_dirs(scratch: Path, sandbox: Sandbox) -> tuple[Path, Path, Path]:
    """The read-only box and the client user's writable home and /tmp, in ``scratch`` (for
    a jailed run outside a pass cell: an agent, a build, a verification command, a
    workload's harness): home and /tmp are bounded tmpfs mounts, as a client's
    (``lab.sandbox.boxfs``; remove ``scratch`` with ``boxfs.remove_tree``)."""
    box, home, tmp = scratch / "box", scratch / "home", scratch / "tmp"
    box.mkdir(mode=0o755)
    box.chmod(0o755)
    for path in (home, tmp):
        path.mkdir(mode=0o700)
        sandbox.bounded(path)
    return box, home, tmp


def _refuse_strays(user: ClientUser) -> None:
    strays = user.processes()
    if strays:
        raise SandboxError(
            f"processes of the client user {user.name!r} are running (pids "
            f"{', '.join(map(str, strays[:5]))}); another lab run is active or a client "
            "escaped; stop them before running the lab."
        )
