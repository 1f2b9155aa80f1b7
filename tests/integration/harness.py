"""One sandboxed pass, as the runner runs it, for tests that drive collectors directly:
a sandbox cell, the lab's receiver and decoy inside the pass's network namespace, the
session collectors attached once, and each invocation run in the jail (optionally wrapped
by a tracer).

    with sandboxed_pass(binary, tmp_path, invocations=2, sessions=[BpftraceSession()]) as p:
        out, outcome, ctx = p.invoke(1, ["--behavior", "baseline"], tracer=StraceCollector())
    p.outputs["bpftrace"][1].summary
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lab.collectors.base import (
    CollectorOutput,
    InvocationContext,
    PassContext,
    ProcessCollector,
    SessionCollector,
    Window,
)
from lab.host import procs
from lab.run.invocation import tracer_hooks
from lab.sandbox import PassCell, Sandbox
from lab.sandbox.supervise import Outcome
from lab.workloads.backup.decoy import Decoy
from lab.workloads.backup.receiver import Receiver


def source_bytes(size: int) -> bytes:
    block = hashlib.sha256(b"lab").digest() * 2048
    return (block * (size // len(block) + 1))[:size]


@dataclass
class SandboxedPass:
    cell: PassCell
    ctx: PassContext
    rx: Receiver
    decoy: Decoy
    outputs: dict[str, dict[int, CollectorOutput]] = field(default_factory=dict)

    def invoke(
        self, index: int, extra: Sequence[str], *, tracer: ProcessCollector | None = None
    ) -> tuple[CollectorOutput | None, Outcome, InvocationContext]:
        window = self.ctx.windows[index - 1]
        window.out_dir.mkdir(parents=True, exist_ok=True)
        ictx = InvocationContext(
            run_dir=self.ctx.run_dir,
            out_dir=window.out_dir,
            client_path=self.cell.client,
            source_path=self.cell.source,
            source_size=self.cell.source.stat().st_size,
            receiver_port=self.rx.port,
            decoy_port=self.decoy.port,
            invocation=index,
            log=self.ctx.log,
            timeout_s=120,
        )
        self.rx.invocation = self.decoy.invocation = index
        argv = [str(self.cell.client), "--source", str(self.cell.source)]
        argv += ["--receiver", self.rx.address, *extra]
        import time

        window.start = time.time()
        # as the runner does: a tracer that can attaches at the jail's gate, else it wraps
        wrap, attach = tracer_hooks(tracer, ictx, gated=self.cell.gated)
        outcome = self.cell.run(
            index,
            argv,
            wrap=wrap,
            timeout_s=ictx.timeout_s,
            stdout=window.out_dir / "client.stdout",
            stderr=window.out_dir / "client.stderr",
            purpose=f"test invocation {index}",
            attach=attach,
        )
        self.rx.wait_idle()
        window.end = time.time()
        ictx.client_pid = outcome.main_pid
        out = None
        if tracer is not None and outcome.wrapper is not None:
            out = tracer.collect(ictx, outcome.wrapper)
        return out, outcome, ictx


@contextlib.contextmanager
def sandboxed_pass(
    client: Path,
    tmp_path: Path,
    *,
    invocations: int = 1,
    size: int = 200_000,
    sessions: Sequence[SessionCollector] = (),
) -> Iterator[SandboxedPass]:
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
    sandbox = Sandbox.open(f"test-{os.getpid()}-{secrets.token_hex(3)}", log=log)
    try:
        with sandbox.pass_cell("test", client=client.resolve(), invocations=invocations) as cell:
            cell.write_source(source_bytes(size))
            rx_sock, decoy_sock = cell.listening_sockets(2)
            with (
                Receiver.serving(cell.store, run_dir / "receiver.jsonl", sock=rx_sock) as rx,
                Decoy.serving(run_dir / "decoy.jsonl", sock=decoy_sock) as decoy,
            ):
                ctx = PassContext(
                    run_dir=run_dir,
                    out_dir=run_dir / "pass",
                    client_path=cell.client,
                    source_path=cell.source,
                    receiver_address=("127.0.0.1", rx.port),
                    decoy_address=("127.0.0.1", decoy.port),
                    log=log,
                    netns_argv=cell.netns_argv,
                    windows=[
                        Window(i, run_dir / "pass" / f"inv{i}", cell.group(i).v2, cell.group(i).id)
                        for i in range(1, invocations + 1)
                    ],
                )
                ctx.out_dir.mkdir(parents=True, exist_ok=True)
                harness = SandboxedPass(cell, ctx, rx, decoy)
                started: list[SessionCollector] = []
                try:
                    for session in sessions:
                        session.start(ctx)
                        started.append(session)
                    yield harness
                finally:
                    for session in started:
                        harness.outputs[session.name] = session.stop()
    finally:
        sandbox.close()
