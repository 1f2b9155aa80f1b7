"""Can this machine sandbox a client? Each capability the sandbox needs is checked on its
own, so that a missing one is named, then one real invocation runs through the whole jail
(``/bin/true`` in its own cgroup, network namespace, mount namespace, as the client user):
proof, not inference.

    status = probe()                      # ObserverStatus; detail["capabilities"] per check
    status.available, status.reason       # reason: the first missing capability, one sentence

Used by ``python -m lab doctor`` and before every run; a candidate is never judged without
it (``lab evaluate`` refuses, naming the capability).
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from lab.errors import LabError, SandboxError
from lab.host import procs
from lab.host.tools import package_for
from lab.model import ObserverStatus

#: every tool of the jail, and what it is for
TOOLS: dict[str, str] = {
    "bwrap": "the mount namespace and the client's file tree",
    "capsh": "the unprivileged user, no capabilities, no_new_privs",
    "nsenter": "entering the pass's network namespace",
    "prlimit": "no core dumps (and RLIMIT_NPROC where no pids controller exists)",
    "ip": "creating the pass's network namespace",
    "useradd": "creating the client user when it is missing",
}


def _check(checks: dict[str, dict[str, Any]], name: str, ok: bool, why: str | None) -> bool:
    checks[name] = {"ok": ok, "why": None if ok else why}
    return ok


def probe() -> ObserverStatus:
    from lab.sandbox import Sandbox
    from lab.sandbox.cgroup import CgroupTree
    from lab.sandbox.user import ClientUser

    checks: dict[str, dict[str, Any]] = {}
    detail: dict[str, Any] = {"capabilities": checks}
    missing = [tool for tool in TOOLS if procs.which(tool) is None]
    for tool, what in TOOLS.items():
        package = package_for(tool) or tool
        _check(
            checks,
            f"tool {tool}",
            tool not in missing,
            f"{tool} ({what}) is not installed; install the Debian package '{package}'",
        )
    if missing:
        return ObserverStatus(False, str(checks[f"tool {missing[0]}"]["why"]) + ".", detail)
    if not _check(
        checks,
        "root",
        os.geteuid() == 0,
        "the sandbox needs root (namespaces, cgroups, the switch to the client user); run the "
        "lab as root, e.g. sudo python -m lab …",
    ):
        return ObserverStatus(False, str(checks["root"]["why"]) + ".", detail)
    try:
        tree = CgroupTree.discover()
        _check(checks, "cgroup v2", True, None)
        detail["cgroup_v2"] = str(tree.v2_root)
        kill = (tree.v2_root / "cgroup.kill").exists() or any(
            (p / "cgroup.kill").exists() for p in tree.v2_root.iterdir() if p.is_dir()
        )
        _check(checks, "cgroup.kill", kill, "the kernel has no cgroup.kill (Linux < 5.14)")
    except (SandboxError, OSError) as exc:
        _check(checks, "cgroup v2", False, str(exc))
        return ObserverStatus(False, str(exc), detail)
    user = ClientUser.lookup()
    detail["user"] = user.to_dict() if user is not None else None
    with tempfile.TemporaryDirectory(prefix="lab-sandbox-probe-") as tmp:
        log = procs.CommandLog(Path(tmp) / "commands.jsonl")
        try:
            sandbox = Sandbox.open(f"probe-{os.getpid()}-{secrets.token_hex(3)}", log=log)
        except LabError as exc:
            _check(checks, "run cgroup and client user", False, str(exc))
            return ObserverStatus(False, str(exc), detail)
        try:
            detail["limits"] = [e.to_dict() for e in sandbox.run_group.enforcement]
            _check(checks, "run cgroup and client user", True, None)
            reason = _end_to_end(sandbox, Path(tmp), checks)
        finally:
            sandbox.close()
    return ObserverStatus(reason is None, reason, detail)


def _end_to_end(sandbox: Any, tmp: Path, checks: dict[str, dict[str, Any]]) -> str | None:
    """``/bin/true`` through the whole jail: the network namespace, bwrap, the cgroup join,
    capsh, prlimit; it must run as the client user, inside its cgroup, and exit 0."""
    true = Path(procs.which("true") or "/bin/true").resolve()
    try:
        with sandbox.pass_cell("probe", client=true, invocations=1) as cell:
            _check(checks, "network namespace", True, None)
            outcome = cell.run(
                1,
                [str(cell.client)],
                wrap=lambda argv: argv,
                timeout_s=30,
                stdout=tmp / "stdout",
                stderr=tmp / "stderr",
                purpose="sandbox capability probe (/bin/true in the jail)",
            )
            cpu = outcome.stats.cpu_usage_s if outcome.stats is not None else None
    except LabError as exc:
        _check(checks, "network namespace", False, str(exc))
        return str(exc)
    ok = outcome.sandbox_error is None and outcome.exit_status == 0 and bool(cpu)
    why = outcome.sandbox_error or (
        f"/bin/true in the sandbox exited with {outcome.exit_status}"
        if outcome.exit_status != 0
        else "/bin/true ran but not inside its cgroup (cpu.stat stayed at zero)"
    )
    _check(checks, "end-to-end (/bin/true in the jail)", ok, why)
    # informational: without it, refused calls are recorded not-observed (never none)
    refused = outcome.refused
    _check(
        checks,
        "refused-call observer (/dev/kmsg)",
        refused is not None and refused.observed,
        None if refused is None else refused.reason,
    )
    return None if ok else why
