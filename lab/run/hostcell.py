"""The pass cell used with ``--sandbox off``: the client runs as the lab's own user, on the
host's loopback, with only the environment allow-list of the sandbox. Nothing contains it, so
the contract does not let any clause it could have forged pass (lab.workloads.backup.contract);
calibration runs on machines without the sandbox's capabilities use it, candidates never.

    with HostCell.opened("baseline-r1-none", client=binary, invocations=2) as cell:
        cell.write_source(data)
        outcome = cell.run(1, argv, wrap=lambda a: a, timeout_s=60, stdout=…, stderr=…,
                           purpose="…")

It has the interface of :class:`lab.sandbox.PassCell` the runner uses.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from lab.host import procs
from lab.sandbox import boxfs
from lab.sandbox.cgroup import InvocationGroup
from lab.sandbox.gate import Attacher
from lab.sandbox.jail import ENVIRONMENT
from lab.sandbox.output import CappedStream
from lab.sandbox.supervise import Outcome


class HostCell:
    #: no jail, so no gate: a tracer wraps the client (``lab.sandbox.cell.PassCell.gated``)
    gated = False

    def __init__(self, *, client: Path, invocations: int, log: procs.CommandLog | None):
        self.scratch = Path(tempfile.mkdtemp(prefix="lab-pass-"))
        self.client = client.resolve()
        self.source = self.scratch / "source.bin"
        self.store = self.scratch / "store"
        self.count = invocations
        self.log = log
        self.netns_name: str | None = None

    @classmethod
    @contextlib.contextmanager
    def opened(
        cls, *, client: Path, invocations: int, log: procs.CommandLog | None
    ) -> Iterator[HostCell]:
        cell = cls(client=client, invocations=invocations, log=log)
        try:
            cell.store.mkdir()
            yield cell
        finally:
            boxfs.remove_tree(cell.scratch, log=log)

    @property
    def netns_argv(self) -> list[str]:
        return []

    def listening_sockets(self, count: int) -> list[Any]:
        return [None] * count  # the endpoints bind 127.0.0.1 themselves

    def group(self, index: int) -> InvocationGroup | None:
        return None

    def write_source(self, data: bytes) -> None:
        self.source.write_bytes(data)

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
        """One invocation on the host; ``started``: called as the client is started.
        ``attach`` is never given: a host cell has no gate (``gated``), a tracer wraps."""
        if attach is not None:
            raise ValueError("a host cell has no gate to attach a tracer at")
        home = self.scratch / f"home-{index}"
        home.mkdir(exist_ok=True)
        env = {**ENVIRONMENT, "HOME": str(home), "TMPDIR": str(home)}
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        out, err = CappedStream(out_r, stdout), CappedStream(err_r, stderr)
        out.start()
        err.start()
        if started is not None:
            started()
        t0 = time.monotonic()
        try:
            done = procs.run(
                wrap(list(client_argv)),
                purpose=purpose,
                log=self.log,
                stdout=out_w,
                stderr=err_w,
                env=env,
                cwd=home,
                timeout=timeout_s,
                accept=None,
            )
        finally:
            os.close(out_w)
            os.close(err_w)
        wall = time.monotonic() - t0
        status = done.exit_status
        if status is None and done.killed_by_signal is not None:
            status = 128 + done.killed_by_signal  # as bwrap reports it in the sandbox
        return Outcome(
            exit_status=status,
            timed_out=done.timed_out,
            wall_s=wall,
            cpu_s=done.cpu_s,
            main_pid=None,
            stdout=out.join(10.0),
            stderr=err.join(10.0),
            wrapper=done,
        )

    def source_changed(self, digest_before: str) -> bool:
        from lab.host.digest import sha256_file

        return not self.source.is_file() or sha256_file(self.source) != digest_before
