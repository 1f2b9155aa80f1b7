"""A pass's cell in the sandbox (``PassCell``): its network namespace, box, store, client
user and invocation cgroups, and the cgroups reserved for it ahead of the cell
(``Reservation``). ``lab.sandbox`` re-exports both; ``Sandbox.pass_cell`` makes one.

    with sandbox.pass_cell("baseline-r1-none", client=binary, invocations=2) as cell:
        cell.write_source(data)
        outcome = cell.run(1, client_argv, wrap=lambda argv: argv, timeout_s=60, ...)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lab.host.live import Beside
from lab.sandbox.boxfs import DiskUse, mount_bounded, remove_tree, usage
from lab.sandbox.cgroup import InvocationGroup
from lab.sandbox.gate import Attacher, Gate
from lab.sandbox.jail import JailSpec, jail_argv, resolv_conf_text
from lab.sandbox.netns import NetworkNamespace, name_for
from lab.sandbox.seccomp import KmsgWatch, Refusals
from lab.sandbox.supervise import Outcome, supervise
from lab.sandbox.user import ClientUser

if TYPE_CHECKING:
    from lab.host import procs


class Sandbox(Protocol):
    """What a cell needs of the run's ``lab.sandbox.Sandbox`` (named here as a protocol, so
    that the package and this module do not import each other)."""

    log: procs.CommandLog | None
    filter: Path
    masked: tuple[Path, ...]

    @property
    def settings(self) -> Any: ...

    def lease(self) -> ClientUser: ...

    def release(self, user: ClientUser) -> None: ...

    def shared_client(self, client: Path) -> Path: ...

    def bounded(self, path: Path, user: ClientUser | None = None) -> None: ...

    def nproc_fallback(self) -> int | None: ...

    def refusals(self, watch: KmsgWatch, user: ClientUser | None = None) -> Refusals: ...


#: the client binary's name inside the box
CLIENT_NAME = "client"
SOURCE_NAME = "source.bin"


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

    #: its jail has a gate a tracer can attach at (``run(attach=…)``, ``lab.sandbox.gate``)
    gated = True

    def __init__(self, sandbox: Sandbox, reserved: Reservation, *, client: Path) -> None:
        self.sandbox = sandbox
        self.tag = reserved.tag
        self.client_source = client
        self.scratch = Path(tempfile.mkdtemp(prefix="lab-pass-"))  # 0700, root's
        self.box = self.scratch / "box"
        self.store = self.scratch / "store"
        self.netns = NetworkNamespace(name_for(self.tag), log=sandbox.log)
        #: the invocation cgroups, made before the cell (``Sandbox.reserve``); the cell
        #: owns them from here on and removes them when it closes
        self.reserved = reserved
        self.groups = reserved.groups
        reserved.taken = True
        #: the client user this cell's invocations run as, its own while the cell is open
        self.user = sandbox.lease()
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
        # the namespace (two ip commands) and the client's bounded HOME and /tmp (two
        # mounts) do not depend on one another: made side by side, each a process start
        # and a wait (8-20 ms of a pass's set-up, docs/performance.md, round 7). The
        # namespace's thread runs in this thread's context, so its processes belong to the
        # caller's process scope (lab.host.live), as this thread's do
        beside = Beside(self.netns.create, name=f"netns {self.tag}")
        try:
            self.home(1)
            self.tmp()
        except BaseException:
            beside.join(raise_error=False)  # the mounts' error is the one raised
            raise
        beside.join()  # the namespace's error, raised on the pass's own thread

    def store_in_memory(self, size: int) -> None:
        """Mount the receiver's store as a tmpfs of ``size`` bytes (root's, 0700): a commit's
        syncs then cost nothing, and the disk's latency, which is no client's, stays out of
        what the cell's invocations are timed for (``lab.evaluate.timing``)."""
        mount_bounded(self.store, size=size, inodes=1024, uid=0, gid=0, log=self.sandbox.log)

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
            self.sandbox.bounded(path, self.user)
        return path

    def disk_use(self) -> dict[str, DiskUse | None]:
        """What HOME and /tmp hold now (read after each invocation, before teardown)."""
        return {"home": usage(self.home(0)), "tmp": usage(self.tmp())}

    def spec(self, index: int) -> JailSpec:
        return JailSpec(
            netns_path=self.netns.path,
            uid=self.user.uid,
            gid=self.user.gid,
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
        started: Callable[[], None] | None = None,
        attach: Attacher | None = None,
    ) -> Outcome:
        """One invocation in the jail; ``started``: called once the client runs;
        ``attach``: a tracer attached to the jail's main process at its gate (it is then
        not a wrapper: ``lab.sandbox.gate``)."""
        spec = self.spec(index)
        gate = None if attach is None else Gate()
        if gate is not None:
            spec = replace(spec, gate_fd=gate.jail_fd)
        settings = self.sandbox.settings
        watch = KmsgWatch.open()
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
            started=started,
            gate=gate,
            attach=attach,
        )
        outcome.disk = self.disk_use()
        outcome.refused = self.sandbox.refusals(watch, self.user)
        return outcome

    def source_changed(self, digest_before: str) -> bool:
        """Whether the source copy on disk differs from the fixture's digest (it is
        read-only to the client, so this should never be true)."""
        from lab.host.digest import sha256_file

        return not self.source.is_file() or sha256_file(self.source) != digest_before

    def close(self) -> None:
        try:
            self.reserved.remove()
            self.netns.delete()
            self.cleanup_problem = remove_tree(self.scratch, log=self.sandbox.log)
        finally:
            self.sandbox.release(self.user)
