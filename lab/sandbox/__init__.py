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
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import SandboxError
from lab.host import procs
from lab.sandbox import boxfs, seccomp
from lab.sandbox import netns as netns_mod
from lab.sandbox.boxfs import DiskUse
from lab.sandbox.cgroup import CgroupTree, InvocationGroup, Limits, RunGroup, opaque_name
from lab.sandbox.jail import JailSpec, jail_argv, resolv_conf_text
from lab.sandbox.supervise import Outcome, supervise
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

#: the client binary's name inside the box
CLIENT_NAME = "client"
SOURCE_NAME = "source.bin"


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
        strays = user.processes()
        if strays:
            raise SandboxError(
                f"processes of the client user {user.name!r} are running (pids "
                f"{', '.join(map(str, strays[:5]))}); another lab run is active or a client "
                "escaped; stop them before running the lab."
            )
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

    def refusals(self, watch: seccomp.KmsgWatch) -> seccomp.Refusals:
        """What the filter refused the client user since ``watch`` was opened."""
        return watch.collect(uid=self.user.uid, names=seccomp.refused_calls(self.filter))

    def bounded(self, path: Path) -> None:
        """Make ``path`` (an empty directory) a bounded tmpfs owned by the client user."""
        limits = self.settings.limits
        boxfs.mount_bounded(
            path,
            size=limits.disk_max,
            inodes=limits.disk_inodes_max,
            uid=self.user.uid,
            gid=self.user.gid,
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


@dataclass
class Reservation:
    """A pass's numbered name and its invocation cgroups, made before its cell
    (``Sandbox.reserve``)."""

    tag: str
    groups: dict[int, InvocationGroup]
    #: set once a cell has taken the groups over (it removes them when it closes)
    taken: bool = False

    def release(self) -> None:
        """Remove the groups unless a cell took them over."""
        if not self.taken:
            self.remove()

    def remove(self) -> None:
        """Kill whatever is left in the groups and remove them."""
        for group in self.groups.values():
            group.kill()
            group.remove()
        self.groups.clear()


class PassCell:
    """Per pass: the network namespace, the box, the store's directory, one cgroup per
    invocation (made before the pass starts, so that a tracer can filter on their ids)."""

    def __init__(self, sandbox: Sandbox, reserved: Reservation, *, client: Path) -> None:
        self.sandbox = sandbox
        self.tag = reserved.tag
        self.client_source = client
        self.scratch = Path(tempfile.mkdtemp(prefix="lab-pass-"))  # 0700, root's
        self.box = self.scratch / "box"
        self.store = self.scratch / "store"
        self.netns = netns_mod.NetworkNamespace(netns_mod.name_for(self.tag), log=sandbox.log)
        #: the invocation cgroups, made before the cell (``Sandbox.reserve``); the cell
        #: owns them from here on and removes them when it closes
        self.reserved = reserved
        self.groups = reserved.groups
        reserved.taken = True
        #: one sentence when the scratch directory could not be removed (``close``)
        self.cleanup_problem: str | None = None

    @property
    def client(self) -> Path:
        return self.box / CLIENT_NAME

    @property
    def netns_argv(self) -> list[str]:
        return self.netns.enter_argv()

    @property
    def netns_name(self) -> str:
        return self.netns.name

    def listening_sockets(self, count: int) -> list[Any]:
        return list(self.netns.listening_sockets(count))

    @property
    def source(self) -> Path:
        return self.box / SOURCE_NAME

    def open(self) -> None:
        self.box.mkdir(mode=0o755)
        self.box.chmod(0o755)
        self.store.mkdir(mode=0o700)
        shared = self.sandbox.shared_client(self.client_source)
        try:
            os.link(shared, self.client)
        except OSError:
            # another file system: a copy of its own (a shared bpftrace session then sees
            # another inode, and the runner gives this pass a session of its own)
            shutil.copyfile(shared, self.client)
            self.client.chmod(0o555)
        (self.box / "resolv.conf").write_text(resolv_conf_text(), encoding="ascii")
        (self.box / "resolv.conf").chmod(0o444)
        self.netns.create()

    def runs_inode_of(self, path: Path) -> bool:
        """Whether the box's client is the very file ``path`` (same device and inode)."""
        mine, other = os.stat(self.client), os.stat(path)
        return (mine.st_dev, mine.st_ino) == (other.st_dev, other.st_ino)

    def write_source(self, data: bytes) -> None:
        with open(self.source, "wb") as fh:
            fh.write(data)
        self.source.chmod(0o444)

    def group(self, index: int) -> InvocationGroup:
        return self.groups[index]

    def home(self, index: int) -> Path:
        """The pass's home for the client (``index`` kept for callers: one per pass)."""
        return self._client_dir("home")

    def tmp(self) -> Path:
        return self._client_dir("tmp")

    def _client_dir(self, name: str) -> Path:
        # state a client keeps between its runs lives on through the pass's invocations,
        # in a bounded tmpfs of its own (lab.sandbox.boxfs)
        path = self.scratch / name
        if not path.exists():
            path.mkdir(mode=0o700)
            self.sandbox.bounded(path)
        return path

    def disk_use(self) -> dict[str, DiskUse | None]:
        """What HOME and /tmp hold now (read after each invocation, before teardown)."""
        return {"home": boxfs.usage(self.home(0)), "tmp": boxfs.usage(self.tmp())}

    def spec(self, index: int) -> JailSpec:
        return JailSpec(
            netns_path=self.netns.path,
            uid=self.sandbox.user.uid,
            gid=self.sandbox.user.gid,
            box=self.box,
            home=self.home(index),
            tmp=self.tmp(),
            resolv_conf=self.box / "resolv.conf",
            join_files=tuple(self.group(index).join_files()),
            filter=self.sandbox.filter,
            nproc=self.sandbox.nproc_fallback(),
            masked=self.sandbox.masked,
        )

    def run(
        self,
        index: int,
        client_argv: Sequence[str],
        *,
        wrap: Callable[[list[str]], list[str]],
        timeout_s: float,
        stdout: Path,
        stderr: Path,
        purpose: str,
    ) -> Outcome:
        spec = self.spec(index)
        settings = self.sandbox.settings
        watch = seccomp.KmsgWatch.open()
        outcome = supervise(
            argv_for=lambda fd: wrap(jail_argv(spec, client_argv, status_fd=fd)),
            group=self.group(index),
            timeout_s=timeout_s,
            linger_grace_s=settings.linger_grace_s,
            stdout=stdout,
            stderr=stderr,
            purpose=purpose,
            log=self.sandbox.log,
            head=settings.output_head,
            tail=settings.output_tail,
        )
        outcome.disk = self.disk_use()
        outcome.refused = self.sandbox.refusals(watch)
        return outcome

    def source_changed(self, digest_before: str) -> bool:
        """Whether the source copy on disk differs from the fixture's digest (it is
        read-only to the client, so this should never be true)."""
        from lab.host.digest import sha256_file

        return not self.source.is_file() or sha256_file(self.source) != digest_before

    def close(self) -> None:
        self.reserved.remove()
        self.netns.delete()
        self.cleanup_problem = boxfs.remove_tree(self.scratch, log=self.sandbox.log)
