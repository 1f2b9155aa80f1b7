"""A collector's capability proof, reused within one boot of one machine.

bpftrace's probe compiles and attaches the lab's whole script and checks that a uprobe
fires (1.7 s here); perf's records a real process (0.2 s). What decides their outcome is the
running kernel, the tool's binary, the script the probe attaches, and the privileges the lab
runs with; within one boot the kernel does not change. So a *successful* probe is kept, with
all of these as its key, and a later run on the same boot with the same binary, script,
uid and capability set reuses it (saying so in its observer record: ``probe_reused``).
Anything else probes again: another boot, a rebuilt or upgraded tool, a changed script, a
container with fewer capabilities. A failure is never kept: a capability gained is seen at
once. And a proof that went stale anyway (a kernel lockdown raised mid-boot) does not turn
into a false observation: the session that then cannot attach fails its own passes, with
bpftrace's sentence, as a failed probe would have. ``lab doctor`` always probes afresh.

    status = reuse_or_probe("bpftrace", tool="/usr/bin/bpftrace",
                            inputs=[script_bytes], probe=BpftraceSession.probe)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lab import __version__
from lab.host.clock import now_rfc3339
from lab.model import ObserverStatus

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


LOCKDOWN = Path("/sys/kernel/security/lockdown")


def sysctl_bytes(*paths: Path) -> list[bytes]:
    """The current contents of kernel settings a probe's outcome depends on (a setting
    that cannot be read counts as empty), for ``reuse_or_probe``'s inputs."""
    found = []
    for path in (*paths, LOCKDOWN):
        try:
            found.append(path.read_bytes())
        except OSError:
            found.append(b"")
    return found


def cache_root() -> Path:
    """Where proofs are kept: the lab's cache directory (``lab.resources.cache_dir``)."""
    from lab.resources import cache_dir

    return cache_dir() / "probes"


def _status_line(name: str) -> str:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return ""
    return next((line for line in text.splitlines() if line.startswith(name)), "")


def probe_key(name: str, tool: str | None, inputs: Sequence[bytes]) -> str | None:
    """The key of everything a probe's outcome depends on, or None when one of them cannot
    be read (then the probe always runs)."""
    try:
        boot = BOOT_ID.read_text().strip()
        binary = os.stat(os.path.realpath(tool)) if tool is not None else None
    except OSError:
        return None
    if not boot:
        return None
    digest = hashlib.sha256()
    parts = [
        name,
        __version__,
        boot,
        os.uname().release,
        str(os.geteuid()),
        _status_line("CapEff:"),
        _status_line("NoNewPrivs:"),
        "" if binary is None else f"{binary.st_dev}:{binary.st_ino}:{binary.st_size}",
        "" if binary is None else str(binary.st_mtime_ns),
    ]
    for part in [p.encode() for p in parts] + list(inputs):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def reuse_or_probe(
    name: str,
    *,
    tool: str | None,
    inputs: Sequence[bytes],
    probe: Callable[[], ObserverStatus],
    root: Path | None = None,
) -> ObserverStatus:
    """A kept successful proof with the same key, or ``probe()`` (kept when it succeeds)."""
    key = probe_key(name, tool, inputs)
    if key is None:
        return probe()
    path = (root or cache_root()) / f"{name}-{key}.json"
    kept = _read(path)
    if kept is not None:
        detail = dict(kept.get("detail") or {})
        detail["probe_reused"] = {
            "probed_at": kept.get("probed_at"),
            "why": "the same boot, tool binary, probe script and privileges as that probe",
        }
        return ObserverStatus(True, None, detail)
    status = probe()
    if status.available:
        with contextlib.suppress(OSError, TypeError, ValueError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + f".tmp{os.getpid()}")
            record = {"probed_at": now_rfc3339(), "detail": status.detail}
            tmp.write_text(json.dumps(record, sort_keys=True), encoding="utf-8")
            tmp.replace(path)
    return status


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("detail", {}), dict):
        return None
    return record
