"""The safe-store harness run in the client sandbox, under the kernel's witness: the
dedicated unprivileged user, its own cgroup, no network (a namespace with loopback only),
bounded time and output, and ``strace -f -yy`` on the file, descriptor and process calls
(``lab.collectors.strace.file_trace_argv``). The planted directory is bound writable at its
own path, so that the paths strace decodes inside the sandbox are the lab's paths.

    ran = run_harness(sandbox, harness=binary, layout=layout, out=out, timeout_s=60)
    ran.outcome.exit_status, ran.trace          # out/strace-files.txt, verbatim
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lab.collectors.strace import file_trace_argv
from lab.sandbox import Sandbox, boxfs, cell_dirs
from lab.sandbox import netns as netns_mod
from lab.sandbox.cgroup import InvocationGroup
from lab.sandbox.jail import JailSpec, jail_argv, resolv_conf_text
from lab.sandbox.supervise import Outcome, supervise
from lab.workloads.safestore.plan import Layout

TRACE_NAME = "strace-files.txt"


@dataclass(frozen=True)
class HarnessRun:
    outcome: Outcome
    #: the trace (None when strace is not used)
    trace: Path | None
    stdout: Path
    stderr: Path


def _spec(
    sandbox: Sandbox,
    scratch: Path,
    harness: Path,
    layout: Layout,
    group: InvocationGroup,
    namespace: netns_mod.NetworkNamespace,
) -> JailSpec:
    """The box (the harness and its plan, read-only), home and /tmp, the namespace made."""
    box, home, tmp = cell_dirs(scratch, sandbox)
    shutil.copyfile(harness, box / "harness")
    (box / "harness").chmod(0o555)
    (box / "plan.json").write_text(layout.plan_json(), encoding="utf-8")
    (box / "plan.json").chmod(0o444)
    (box / "resolv.conf").write_text(resolv_conf_text(), encoding="ascii")
    namespace.create()
    return JailSpec(
        netns_path=namespace.path,
        uid=sandbox.user.uid,
        gid=sandbox.user.gid,
        box=box,
        home=home,
        tmp=tmp,
        resolv_conf=box / "resolv.conf",
        join_files=tuple(group.join_files()),
        filter=sandbox.filter,
        nproc=sandbox.nproc_fallback(),
        masked=sandbox.masked,
        workdir=layout.base,
    )


def run_harness(
    sandbox: Sandbox,
    *,
    harness: Path,
    layout: Layout,
    out: Path,
    timeout_s: float,
    traced: bool = True,
) -> HarnessRun:
    """Run ``harness PLAN`` once, sandboxed, and wait for everything it started to end."""
    tag = f"safestore-{secrets.token_hex(3)}"
    group = sandbox.run_group.invocation(tag)
    namespace = netns_mod.NetworkNamespace(netns_mod.name_for(tag), log=sandbox.log)
    scratch = Path(tempfile.mkdtemp(prefix="lab-safestore-cell-"))
    try:
        spec = _spec(sandbox, scratch, harness, layout, group, namespace)
        argv = [str(spec.box / "harness"), str(spec.box / "plan.json")]
        trace = out / TRACE_NAME if traced else None

        def argv_for(fd: int) -> list[str]:
            jailed = jail_argv(spec, argv, status_fd=fd)
            return jailed if trace is None else file_trace_argv(trace, jailed)

        stdout, stderr = out / "harness.stdout", out / "harness.stderr"
        outcome = supervise(
            argv_for=argv_for,
            group=group,
            timeout_s=timeout_s,
            linger_grace_s=sandbox.settings.linger_grace_s,
            stdout=stdout,
            stderr=stderr,
            purpose="safe-store harness",
            log=sandbox.log,
            head=sandbox.settings.output_head,
            tail=sandbox.settings.output_tail,
        )
        return HarnessRun(outcome, trace, stdout, stderr)
    finally:
        group.kill()
        with contextlib.suppress(OSError):
            group.remove()
        namespace.delete()
        boxfs.remove_tree(scratch, log=sandbox.log)
