"""What this machine can observe, and why not: the four collectors plus the kernel facts
they depend on.

    doctor = check()                  # probes every collector; mounts tracefs/debugfs as root
    print(render_table(doctor))       # human table: collector | available | reason
    json.dumps(to_json(doctor))       # ``python -m lab doctor --json``

``check`` is a producer (it runs tools through :mod:`lab.host.procs`); ``render_table`` and
``to_json`` only draw the :class:`Doctor` it returns.
"""

from __future__ import annotations

import importlib
import io
import os
import platform
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import ToolMissingError
from lab.host.capabilities import (
    CAPABILITY_NAMES,
    capability_mask,
    decode_capabilities,
)
from lab.host.probecache import reuse_or_probe
from lab.host.procs import CommandFailed, run, which
from lab.model import ObserverStatus
from lab.registry import COLLECTOR_NAMES, COLLECTORS, collector

#: module and class of each collector (the registry's); imported lazily so that one broken
#: module does not hide the others (and collectors may import from here without a cycle)
_COLLECTOR_CLASSES: dict[str, tuple[str, str]] = {c.name: (c.module, c.cls) for c in COLLECTORS}
#: tool -> argv whose first output line is its version
VERSION_COMMANDS: dict[str, list[str]] = {
    **{c.tool: list(c.version_argv) for c in COLLECTORS},
    # what builds and links the client (docs/build-type.md): compilers, make, OpenSSL
    "gcc": ["gcc", "--version"],
    "cc": ["cc", "--version"],
    "make": ["make", "--version"],
    "openssl": ["openssl", "version"],
}


@dataclass(frozen=True)
class Mount:
    fstype: str
    target: Path


#: kernel filesystems bpftrace needs (tracepoints, uprobes); mounted when missing and root
TRACEFS = Mount("tracefs", Path("/sys/kernel/tracing"))
DEBUGFS = Mount("debugfs", Path("/sys/kernel/debug"))
BTF_PATH = Path("/sys/kernel/btf/vmlinux")
IBS_OP_PATH = Path("/sys/bus/event_source/devices/ibs_op")


@dataclass
class Doctor:
    observers: dict[str, ObserverStatus]
    facts: dict[str, Any]
    actions: list[str] = field(default_factory=list)
    #: whether every client invocation can be sandboxed here (None: not probed)
    sandbox: ObserverStatus | None = None


# ---------------------------------------------------------------------------------------
# Facts (pure parsers first, so they can be tested on captured text)


def mounted_filesystems(mounts_text: str) -> dict[str, str]:
    """``/proc/mounts`` -> {mount point: filesystem type}."""
    table: dict[str, str] = {}
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            # /proc/mounts escapes spaces in paths as \040
            table[parts[1].replace("\\040", " ")] = parts[2]
    return table


def is_mounted(mount: Mount, table: dict[str, str]) -> bool:
    return table.get(str(mount.target)) == mount.fstype


def cpu_model(cpuinfo_text: str) -> str | None:
    for line in cpuinfo_text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def tool_version(argv: list[str]) -> str | None:
    """First non-empty line a tool prints for its version (stdout, else stderr)."""
    if which(argv[0]) is None:
        return None
    with tempfile.TemporaryDirectory(prefix="lab-doctor-") as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        try:
            run(
                argv,
                purpose=f"{argv[0]} version",
                stdout=out,
                stderr=err,
                timeout=30.0,
                accept=None,
            )
        except ToolMissingError:
            return None
        for path in (out, err):
            for line in _read(path).splitlines():
                if line.strip():
                    return line.strip()
    return None


# ---------------------------------------------------------------------------------------
# Mounting and probing


def ensure_mounted(
    mounts: Iterable[Mount],
    table: dict[str, str],
    *,
    is_root: bool,
    mounter: Callable[[Mount], str | None],
) -> list[str]:
    """Mount each missing filesystem when root; return one sentence per thing done or not.

    ``mounter`` returns None on success or the reason it failed.
    """
    actions: list[str] = []
    for mount in mounts:
        if is_mounted(mount, table):
            continue
        if not is_root:
            actions.append(
                f"{mount.fstype} is not mounted at {mount.target} and only root can mount it"
            )
            continue
        failure = mounter(mount)
        if failure is None:
            actions.append(f"mounted {mount.fstype} at {mount.target}")
        else:
            actions.append(f"could not mount {mount.fstype} at {mount.target}: {failure}")
    return actions


def _mount(mount: Mount) -> str | None:
    try:
        run(
            ["mount", "-t", mount.fstype, "nodev", str(mount.target)],
            purpose=f"mount {mount.fstype}",
            timeout=30.0,
        )
    except (CommandFailed, ToolMissingError) as exc:
        return str(exc)
    return None


def probe_collector(name: str, *, reuse: bool = False) -> ObserverStatus:
    """Import the collector lazily and call its ``probe()``; never raises. With ``reuse``,
    a collector whose probe names its inputs (``probe_inputs``) may reuse a successful
    probe of the same boot, binary, inputs and privileges (``lab.host.probecache``)."""
    module_name, class_name = _COLLECTOR_CLASSES[name]
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
    except Exception as exc:  # an import error must not hide the other collectors
        return ObserverStatus(
            False, f"the {name} collector could not be loaded ({type(exc).__name__}: {exc})"
        )
    try:
        inputs = getattr(cls, "probe_inputs", None)
        if reuse and inputs is not None:
            status = reuse_or_probe(
                name, tool=which(collector(name).tool), inputs=inputs(), probe=cls.probe
            )
        else:
            status = cls.probe()
    except Exception as exc:  # probe() must never raise; if it does, say so
        return ObserverStatus(
            False, f"the {name} collector's probe failed ({type(exc).__name__}: {exc})"
        )
    if not isinstance(status, ObserverStatus):
        return ObserverStatus(False, f"the {name} collector's probe returned {status!r}")
    return status


def gather_facts() -> dict[str, Any]:
    paranoid_text = _read(Path("/proc/sys/kernel/perf_event_paranoid")).strip()
    mask = capability_mask(_read(Path("/proc/self/status")))
    table = mounted_filesystems(_read(Path("/proc/mounts")))
    return {
        "kernel_release": os.uname().release,
        "machine": platform.machine(),
        "cpu_model": cpu_model(_read(Path("/proc/cpuinfo"))),
        "is_root": os.geteuid() == 0,
        "capabilities": decode_capabilities(mask) if mask else [],
        "capability_mask": mask,
        "tracefs_mounted": is_mounted(TRACEFS, table),
        "debugfs_mounted": is_mounted(DEBUGFS, table),
        "btf": BTF_PATH.exists(),
        "perf_event_paranoid": int(paranoid_text) if paranoid_text.lstrip("-").isdigit() else None,
        "ibs_op": IBS_OP_PATH.exists(),
        "tool_versions": tool_versions(),
    }


def tool_versions() -> dict[str, str | None]:
    """Every tool's version line, the commands run side by side (each is a process start and
    a wait: eight of them one after another took 60-70 ms)."""
    with ThreadPoolExecutor(
        max_workers=len(VERSION_COMMANDS), thread_name_prefix="lab-version"
    ) as pool:
        lines = list(pool.map(tool_version, VERSION_COMMANDS.values()))
    return dict(zip(VERSION_COMMANDS, lines, strict=True))


def check(
    mount: bool = True,
    *,
    collectors: Iterable[str] | None = None,
    sandbox: bool = False,
    facts: bool = True,
    reuse: bool = False,
) -> Doctor:
    """Probe the given collectors (every one by default) and, with ``sandbox``, the
    sandbox. As root, first mount tracefs and debugfs if they are missing (bpftrace needs
    them), and say so in ``actions``. A collector not probed is absent from ``observers``:
    a run asks only for what it uses (the bpftrace attach test alone takes seconds)."""
    wanted = list(COLLECTOR_NAMES if collectors is None else collectors)
    actions: list[str] = []
    if mount and any(collector(name).needs_tracefs for name in wanted):
        table = mounted_filesystems(_read(Path("/proc/mounts")))
        actions = ensure_mounted(
            (TRACEFS, DEBUGFS), table, is_root=os.geteuid() == 0, mounter=_mount
        )
    # every probe and the facts side by side: each is mostly waiting on a tool (bpftrace's
    # attach test alone takes 1-2 s), and none depends on another
    names = [name for name in COLLECTOR_NAMES if name in wanted]
    with ThreadPoolExecutor(max_workers=len(names) + 2, thread_name_prefix="lab-probe") as pool:
        probes = [pool.submit(probe_collector, name, reuse=reuse) for name in names]
        found = pool.submit(gather_facts) if facts else None
        status = pool.submit(_probe_sandbox) if sandbox else None
        observers = {name: done.result() for name, done in zip(names, probes, strict=True)}
        return Doctor(
            observers=observers,
            facts={} if found is None else found.result(),
            actions=actions,
            sandbox=None if status is None else status.result(),
        )


def _probe_sandbox() -> Any:
    from lab.sandbox.probe import probe

    return probe()


# ---------------------------------------------------------------------------------------
# Presenters


def to_json(doctor: Doctor) -> dict[str, Any]:
    """``doctor --json``: ``ok`` is the verdict (every observer available, and the sandbox
    when it was probed); ``unavailable`` names what is not."""
    unavailable = sorted(k for k, status in doctor.observers.items() if not status.available)
    if doctor.sandbox is not None and not doctor.sandbox.available:
        unavailable.append("sandbox")
    return {
        "ok": not unavailable,
        "unavailable": unavailable,
        "observers": {k: doctor.observers[k].to_dict() for k in sorted(doctor.observers)},
        "sandbox": None if doctor.sandbox is None else doctor.sandbox.to_dict(),
        "facts": doctor.facts,
        "actions": list(doctor.actions),
    }


def _capabilities_text(names: list[str]) -> str:
    """Most root processes hold nearly every capability: name the missing ones instead."""
    missing = [n for n in CAPABILITY_NAMES if n not in names]
    if len(missing) < len(CAPABILITY_NAMES) // 2:
        extra = [n for n in names if n not in CAPABILITY_NAMES]
        text = "all except " + ", ".join(missing) if missing else "all"
        return text + (" (and " + ", ".join(extra) + ")" if extra else "")
    return ", ".join(names) if names else "none"


def _fact_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "unknown"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "none"
    return str(value)


def render_table(doctor: Doctor, *, width: int = 100) -> str:
    from rich.console import Console
    from rich.table import Table

    observers = Table(title="Collectors", show_lines=False)
    observers.add_column("collector")
    observers.add_column("available")
    observers.add_column("reason", overflow="fold")
    order = {name: i for i, name in enumerate(COLLECTOR_NAMES)}
    for name in sorted(doctor.observers, key=lambda n: (order.get(n, len(order)), n)):
        status = doctor.observers[name]
        observers.add_row(name, "yes" if status.available else "no", status.reason or "")

    facts = Table(title="Facts")
    facts.add_column("fact")
    facts.add_column("value", overflow="fold")
    for key, value in doctor.facts.items():
        if key == "tool_versions" and isinstance(value, dict):
            for tool, version in value.items():
                facts.add_row(f"{tool} version", version or "not installed")
        elif key == "capabilities" and isinstance(value, list):
            facts.add_row(key, _capabilities_text(value))
        else:
            facts.add_row(key, _fact_text(value))

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True, highlight=False)
    console.print(observers)
    if doctor.sandbox is not None:
        sandbox = Table(title="Sandbox (every client invocation runs in it)")
        sandbox.add_column("capability")
        sandbox.add_column("available")
        sandbox.add_column("reason", overflow="fold")
        for name, row in doctor.sandbox.detail.get("capabilities", {}).items():
            sandbox.add_row(name, "yes" if row.get("ok") else "no", row.get("why") or "")
        for limit in doctor.sandbox.detail.get("limits", []):
            how = limit.get("mechanism") or f"not enforced: {limit.get('why')}"
            sandbox.add_row(f"limit {limit['limit']} = {limit['value']}", "yes", how)
        console.print(sandbox)
    console.print(facts)
    for action in doctor.actions:
        console.print(f"- {action}")
    return buffer.getvalue()
