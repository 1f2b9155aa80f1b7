"""The dedicated, unprivileged user every client runs as (``lab-client``).

The lab creates it when absent (``useradd --system``, no home, no login shell). A client
must not share its uid with anything else: a uid that owns files or processes outside the
sandbox is refused, so that a client can neither signal nor read what another program of
that uid holds.

    user = ClientUser.ensure(log=log)      # creates lab-client as root when missing
    user.uid, user.gid                     # numeric: capsh is given numbers, so that no
                                           # name lookup (NSS, nscd socket) happens in the trace
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from lab.errors import SandboxError
from lab.host import procs

DEFAULT_NAME = "lab-client"
ENV_NAME = "LAB_CLIENT_USER"


def default_name() -> str:
    """``lab-client``, or the name ``LAB_CLIENT_USER`` gives: a developer running two labs on
    one machine gives each its own user, since a run refuses a user another run's client is
    still running as."""
    return os.environ.get(ENV_NAME) or DEFAULT_NAME


@dataclass(frozen=True)
class ClientUser:
    name: str
    uid: int
    gid: int

    @classmethod
    def lookup(cls, name: str | None = None) -> ClientUser | None:
        name = name or default_name()
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            return None
        return cls(name, entry.pw_uid, entry.pw_gid)

    @classmethod
    def ensure(cls, name: str | None = None, *, log: procs.CommandLog | None = None) -> ClientUser:
        """The user, created first when missing (root only); raises SandboxError."""
        name = name or default_name()
        user = cls.lookup(name)
        if user is None:
            if os.geteuid() != 0:
                raise SandboxError(
                    f"the client user {name!r} does not exist and only root can create it; "
                    f"run the lab as root or create it: useradd --system --user-group "
                    f"--no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin {name}"
                )
            try:
                procs.run(
                    [
                        "useradd", "--system", "--user-group", "--no-create-home",
                        "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name,
                    ],
                    purpose="create the unprivileged client user",
                    log=log,
                    tool="useradd",
                    timeout=60,
                    capture=True,
                )  # fmt: skip
            except procs.CommandFailed as exc:
                raise SandboxError(
                    f"the client user {name!r} could not be created ({exc})."
                ) from exc
            user = cls.lookup(name)
            if user is None:
                raise SandboxError(f"useradd reported success but {name!r} does not exist.")
        user.check()
        return user

    @classmethod
    def family(cls, name: str | None = None) -> list[ClientUser]:
        """The client user and its slot users (``<name>-2``, ``<name>-3``, …: one per pass
        that may run at once, ``Sandbox.use_slots``) that exist on this machine."""
        base = name or default_name()
        found = []
        for entry in pwd.getpwall():
            suffix = entry.pw_name[len(base) + 1 :]
            if entry.pw_name == base or (entry.pw_name.startswith(f"{base}-") and suffix.isdigit()):
                found.append(cls(entry.pw_name, entry.pw_uid, entry.pw_gid))
        return sorted(found, key=lambda u: (len(u.name), u.name))

    def check(self) -> None:
        """Refuse a uid that is root, or that any other account or running process shares."""
        if self.uid == 0 or self.gid == 0:
            raise SandboxError(f"the client user {self.name!r} has uid or gid 0; it must not.")
        sharing = sorted(e.pw_name for e in pwd.getpwall() if e.pw_uid == self.uid)
        if sharing != [self.name]:
            raise SandboxError(
                f"uid {self.uid} of {self.name!r} is shared with {', '.join(sharing)}; give the "
                "client user a uid of its own."
            )

    def processes(self, proc: Path = Path("/proc")) -> list[int]:
        """Pids of every process now running as this user (there should be none between
        invocations: each ends with its cgroup emptied). A zombie is not running: it has
        exited and left its cgroup, and only waits for whoever adopted it to reap it (an
        orphan's reaper is the machine's init, which may take its time)."""
        found: list[int] = []
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid != self.uid:
                    continue
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # "pid (comm) S ...": the state follows the last ')' (comm may hold any byte)
            if stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] != "Z":
                found.append(int(entry.name))
        return sorted(found)

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "uid": self.uid, "gid": self.gid}
