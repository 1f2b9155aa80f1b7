"""Builders shared by the collector tests: an invocation context in a temporary run
directory, and a ``Completed`` record of the wrapped command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.collectors.base import InvocationContext
from lab.host.procs import CommandLog, Completed

#: size of the small fixture source the captured traces read (tests/assets/strace/capture.py)
SIZE = 200000


def make_ctx(
    tmp_path: Path,
    *,
    client: Path = Path("/usr/bin/true"),
    source: str = "/tmp/lab-fixture/source >1.bin",
) -> InvocationContext:
    out = tmp_path / "run" / "inv1"
    out.mkdir(parents=True)
    return InvocationContext(
        run_dir=tmp_path / "run",
        out_dir=out,
        client_path=client,
        source_path=Path(source),
        source_size=SIZE,
        receiver_port=1,
        decoy_port=2,
        invocation=1,
        log=CommandLog(tmp_path / "run" / "commands.jsonl", root=tmp_path / "run"),
        timeout_s=5,
    )


def completed(tool: str, status: int | None = 0, **kw: Any) -> Completed:
    return Completed(
        argv=[tool],
        purpose="t",
        exit_status=status,
        duration_s=0.1,
        stdout_path=None,
        stderr_path=kw.pop("stderr_path", None),
        started_at=0.0,
        **kw,
    )
