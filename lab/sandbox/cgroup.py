"""Control groups for client invocations: one cgroup v2 per invocation (under one per run),
so that every descendant of the client is accounted for, killed together and limited.

The cgroup v2 tree tracks and kills (``cgroup.procs``, ``cgroup.events``, ``cgroup.kill``)
and gives the CPU time of everything inside (``cpu.stat``). ``pids.max`` and
``memory.max`` come from the v2 controllers when the tree offers them (a pure v2 host),
else from the v1 ``pids`` and ``memory`` hierarchies (a hybrid host, as on the lab's own
machines, where ``cgroup.controllers`` of the v2 tree holds neither). Which mechanism
enforced each limit is recorded; a limit nothing could enforce is recorded as such.

    tree = CgroupTree.discover()                 # raises SandboxError with the reason
    run = tree.run_group("run-20261201T1100Z-ab12cd", Limits(pids_max=256))
    inv = run.invocation("baseline-r1-none-inv1")
    inv.join_files()          # the cgroup.procs files a process writes its pid into
    ...                       # the sandbox's shell step joins them, then execs the client
    inv.pids()                # every process still inside
    inv.kill()                # cgroup.kill, then wait until empty
    inv.stats()               # CPU time, peaks where the kernel reports them
    inv.remove(); run.remove()

Everything here is cgroup files: no library, no daemon.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import SandboxError
from lab.model.sandbox import CgroupStats, ProcessInfo

#: where the lab puts its cgroups, under the root of each hierarchy it uses
LAB_GROUP = "execution-evidence-lab"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


@dataclass(frozen=True)
class Limits:
    """Resource bounds of one client invocation (part of the frozen evaluation id)."""

    #: processes and threads in the invocation's cgroup at once (a fork bomb stops here)
    pids_max: int = 256
    #: bytes of memory charged to the cgroup (page cache and tmpfs included)
    memory_max: int = 1024 * 1024 * 1024

    def to_dict(self) -> dict[str, int]:
        return {"pids_max": self.pids_max, "memory_max": self.memory_max}


@dataclass(frozen=True)
class Mounts:
    """The cgroup hierarchies of this mount namespace."""

    #: the cgroup2 mount point, if any
    v2: Path | None
    #: v1 controller name -> its hierarchy's mount point
    v1: dict[str, Path] = field(default_factory=dict)


def parse_mountinfo(text: str) -> Mounts:
    """Find the cgroup2 mount and the v1 hierarchies in ``/proc/self/mountinfo`` text."""
    v2: Path | None = None
    v1: dict[str, Path] = {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        rest = right.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        target = Path(fields[4].replace("\\040", " "))
        fstype, options = rest[0], rest[2].split(",")
        if fstype == "cgroup2" and v2 is None:
            v2 = target
        elif fstype == "cgroup":
            for option in options:
                if option in ("pids", "memory", "cpu", "cpuacct", "freezer"):
                    v1.setdefault(option, target)
    return Mounts(v2=v2, v1=v1)


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` -> {"": v2 path, "pids": v1 path, ...}."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            paths[""] = path
        for name in controllers.split(","):
            if name:
                paths[name] = path
    return paths


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(value)


def _keyed(text: str) -> dict[str, int]:
    """``key value`` lines (``cpu.stat``, ``cgroup.events``) -> {key: int}."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[key] = int(value.strip())
    return out


@dataclass
class Enforcement:
    """How one limit is enforced: ``mechanism`` is ``"cgroup v2 pids.max"``, ``"cgroup v1
    memory.limit_in_bytes"``, … or None (not enforced: ``why`` says why)."""

    limit: str
    value: int
    mechanism: str | None
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "value": self.value,
            "mechanism": self.mechanism,
            "why": self.why,
        }


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100


def describe_process(pid: int, *, proc: Path = Path("/proc")) -> ProcessInfo:
    """comm, argv (at most 32 words of 200 characters) and age of ``pid``, read from /proc;
    whatever cannot be read (the process just exited) is left empty."""
    base = proc / str(pid)
    comm = _read(base / "comm").strip()
    try:
        raw = (base / "cmdline").read_bytes()
    except OSError:
        raw = b""
    argv = [w.decode("utf-8", "replace")[:200] for w in raw.split(b"\0") if w][:32]
    age: float | None = None
    stat = _read(base / "stat")
    uptime = _read(proc / "uptime").split()
    if stat and uptime:
        # field 22 (starttime, in clock ticks since boot) counts from after the ")" of comm
        after = stat.rsplit(")", 1)[-1].split()
        with contextlib.suppress(IndexError, ValueError):
            age = float(uptime[0]) - int(after[19]) / _clock_ticks()
    return ProcessInfo(pid=pid, comm=comm, argv=argv, age_s=age)


class InvocationGroup:
    """The cgroup (v2, plus v1 limit groups on a hybrid host) of one client invocation."""

    def __init__(self, run: RunGroup, name: str) -> None:
        self.run = run
        self.name = name
        self.v2 = run.v2 / name
        self.v1 = {ctrl: path / name for ctrl, path in run.v1.items()}

    def create(self) -> None:
        self.v2.mkdir()
        for path in self.v1.values():
            path.mkdir()
        limits = self.run.limits
        for enforcement in self.run.enforcement:
            if enforcement.mechanism is None:
                continue
            value = str(limits.pids_max if enforcement.limit == "pids_max" else limits.memory_max)
            if enforcement.mechanism == "cgroup v2 pids.max":
                _write(self.v2 / "pids.max", value)
            elif enforcement.mechanism == "cgroup v2 memory.max":
                _write(self.v2 / "memory.max", value)
                with contextlib.suppress(OSError):
                    _write(self.v2 / "memory.swap.max", "0")
            elif enforcement.mechanism == "cgroup v1 pids.max":
                _write(self.v1["pids"] / "pids.max", value)
            elif enforcement.mechanism == "cgroup v1 memory.limit_in_bytes":
                _write(self.v1["memory"] / "memory.limit_in_bytes", value)

    @property
    def id(self) -> int:
        """The cgroup v2 id (its directory's inode), as bpftrace's ``cgroup`` builtin reads it."""
        return os.stat(self.v2).st_ino

    def join_files(self) -> list[Path]:
        """The ``cgroup.procs`` files a process writes its own pid into to enter this group
        (v2 first: it is what tracks and kills)."""
        return [self.v2 / "cgroup.procs", *(p / "cgroup.procs" for p in self.v1.values())]

    def pids(self) -> list[int]:
        text = _read(self.v2 / "cgroup.procs")
        return sorted(int(t) for t in text.split() if t.isdigit())

    def populated(self) -> bool:
        return _keyed(_read(self.v2 / "cgroup.events")).get("populated", 0) == 1

    def kill(self, *, timeout_s: float = 5.0) -> bool:
        """Kill every process inside and wait until the group is empty; True when it is.

        ``cgroup.kill`` (Linux 5.14) kills atomically, so a fork bomb cannot outrun it;
        without it each pid is killed in turns while the group stays frozen."""
        kill_file = self.v2 / "cgroup.kill"
        if kill_file.exists():
            with contextlib.suppress(OSError):
                _write(kill_file, "1")
        else:
            freeze = self.v2 / "cgroup.freeze"
            with contextlib.suppress(OSError):
                _write(freeze, "1")
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, 9)
            with contextlib.suppress(OSError):
                _write(freeze, "0")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.populated():
                return True
            time.sleep(0.005)
        return not self.populated()

    def stats(self) -> CgroupStats:
        """CPU time of everything that ran inside (cpu.stat) and peaks the kernel keeps."""
        cpu = _keyed(_read(self.v2 / "cpu.stat"))
        memory_peak = pids_peak = None
        for path in (self.v2 / "memory.peak", *self._v1("memory", "memory.max_usage_in_bytes")):
            value = _read(path).strip()
            if value.isdigit():
                memory_peak = int(value)
                break
        for path in (self.v2 / "pids.peak", *self._v1("pids", "pids.peak")):
            value = _read(path).strip()
            if value.isdigit():
                pids_peak = int(value)
                break
        events = _keyed(_read(self.v2 / "pids.events")) or _keyed(
            "".join(_read(p) for p in self._v1("pids", "pids.events"))
        )
        oom = _keyed(_read(self.v2 / "memory.events")) or _keyed(
            "".join(_read(p) for p in self._v1("memory", "memory.oom_control"))
        )
        return CgroupStats(
            cpu_usage_s=cpu["usage_usec"] / 1e6 if "usage_usec" in cpu else None,
            cpu_user_s=cpu["user_usec"] / 1e6 if "user_usec" in cpu else None,
            cpu_system_s=cpu["system_usec"] / 1e6 if "system_usec" in cpu else None,
            memory_peak_bytes=memory_peak,
            pids_peak=pids_peak,
            pids_max_hit=events.get("max"),
            oom_kills=oom.get("oom_kill"),
        )

    def _v1(self, controller: str, name: str) -> list[Path]:
        return [self.v1[controller] / name] if controller in self.v1 else []

    def remove(self) -> None:
        for path in (self.v2, *self.v1.values()):
            with contextlib.suppress(OSError):
                path.rmdir()


class RunGroup:
    """The cgroup of one run, parent of every invocation group."""

    def __init__(
        self, v2: Path, v1: dict[str, Path], limits: Limits, enforcement: list[Enforcement]
    ) -> None:
        self.v2 = v2
        self.v1 = v1
        self.limits = limits
        self.enforcement = enforcement

    def invocation(self, name: str) -> InvocationGroup:
        if not _NAME.match(name):
            raise SandboxError(f"cgroup name {name!r} is not a plain name (a lab bug).")
        group = InvocationGroup(self, name)
        try:
            group.create()
        except OSError as exc:
            group.remove()
            raise SandboxError(
                f"cannot create the invocation cgroup {group.v2} ({exc.strerror}); "
                "the sandbox needs a writable cgroup v2 tree (python -m lab doctor)."
            ) from exc
        return group

    def remove(self) -> None:
        """Remove the run's groups (and any invocation group a crash left, once empty)."""
        for root in (self.v2, *self.v1.values()):
            if root.is_dir():
                for child in sorted(p for p in root.iterdir() if p.is_dir()):
                    with contextlib.suppress(OSError):
                        child.rmdir()
            with contextlib.suppress(OSError):
                root.rmdir()


class CgroupTree:
    """The hierarchies this machine offers the sandbox, and where the lab's groups go."""

    def __init__(self, mounts: Mounts, own: dict[str, str]) -> None:
        self.mounts = mounts
        self.own = own
        if mounts.v2 is None:
            raise SandboxError(
                "no cgroup v2 hierarchy is mounted (no cgroup2 line in /proc/self/mountinfo); "
                "mount one with 'mount -t cgroup2 none /sys/fs/cgroup/unified' or boot with "
                "systemd.unified_cgroup_hierarchy."
            )
        self.v2_root = mounts.v2

    @classmethod
    def discover(cls) -> CgroupTree:
        mountinfo = _read(Path("/proc/self/mountinfo"))
        own = parse_proc_cgroup(_read(Path("/proc/self/cgroup")))
        return cls(parse_mountinfo(mountinfo), own)

    def v2_controllers(self) -> set[str]:
        return set(_read(self.v2_root / "cgroup.controllers").split())

    def _v1_parent(self, controller: str) -> Path | None:
        mount = self.mounts.v1.get(controller)
        if mount is None:
            return None
        # nest under the lab's own group so that a memory bound set by whoever runs the lab
        # (a CI job's cgroup) still applies to the client
        own = self.own.get(controller, "/").lstrip("/")
        parent = mount / own if own and (mount / own).is_dir() else mount
        return parent / LAB_GROUP

    def run_group(self, name: str, limits: Limits) -> RunGroup:
        if not _NAME.match(name):
            raise SandboxError(f"cgroup name {name!r} is not a plain name (a lab bug).")
        lab_v2 = self.v2_root / LAB_GROUP
        controllers = self.v2_controllers()
        enforcement: list[Enforcement] = []
        v1: dict[str, Path] = {}
        try:
            lab_v2.mkdir(exist_ok=True)
            run_v2 = lab_v2 / name
            run_v2.mkdir()
            for limit, ctrl, v2_file, v1_file in (
                ("pids_max", "pids", "pids.max", "pids.max"),
                ("memory_max", "memory", "memory.max", "memory.limit_in_bytes"),
            ):
                value = limits.pids_max if limit == "pids_max" else limits.memory_max
                if ctrl in controllers and self._enable_v2(ctrl, [lab_v2, run_v2]):
                    enforcement.append(Enforcement(limit, value, f"cgroup v2 {v2_file}"))
                    continue
                parent = self._v1_parent(ctrl)
                if parent is None:
                    enforcement.append(
                        Enforcement(
                            limit,
                            value,
                            None,
                            f"the kernel offers no {ctrl} controller (neither in cgroup v2 "
                            f"nor as a v1 hierarchy)",
                        )
                    )
                    continue
                parent.mkdir(exist_ok=True)
                (parent / name).mkdir()
                v1[ctrl] = parent / name
                enforcement.append(Enforcement(limit, value, f"cgroup v1 {v1_file}"))
        except OSError as exc:
            RunGroup(self.v2_root / LAB_GROUP / name, v1, limits, enforcement).remove()
            raise SandboxError(
                f"cannot create the run's cgroups under {self.v2_root} ({exc.strerror}); the "
                "sandbox needs cgroup v2 mounted read-write and root (python -m lab doctor)."
            ) from exc
        return RunGroup(run_v2, v1, limits, enforcement)

    def _enable_v2(self, controller: str, chain: Iterable[Path]) -> bool:
        """Enable ``controller`` for the children of the root and each group in ``chain``
        but the last; False when the kernel refuses (e.g. a group with processes)."""
        parents = [self.v2_root, *list(chain)[:-1]]
        try:
            for parent in parents:
                _write(parent / "cgroup.subtree_control", f"+{controller}")
        except OSError:
            return False
        return True

    def stale_groups(self) -> list[Path]:
        """Run groups a killed lab left behind (empty ones are removed by ``sweep``)."""
        root = self.v2_root / LAB_GROUP
        return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
