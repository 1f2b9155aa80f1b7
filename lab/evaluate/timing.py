"""Untraced timing runs: clients alternated on the same fixture, reported as medians and a
ratio. Timing is measured with no tracer attached; traced runs are for diagnosis only.

    timing = alternate({"baseline": base, "candidate": cand}, rounds=20, size=524_288,
                       workdir=tmp, log=log, sandbox=sandbox)
    timing.ratio["first_backup_wall"]       # candidate median / baseline median (stored)

With ``sandbox`` (what ``lab evaluate`` does), every round runs in a sandbox cell of its
own, exactly as a judged pass does: a candidate is never run outside the sandbox, timed or
not. Wall time then includes the sandbox's set-up, the same for both clients; CPU time is the
invocation cgroup's (everything the client started).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from lab.host import procs
from lab.judge.aggregate import spread
from lab.model.evaluation import ClientTiming, Timing
from lab.sandbox import Sandbox
from lab.workloads.backup import fixture
from lab.workloads.backup.decoy import Decoy
from lab.workloads.backup.receiver import Receiver


def _one_round(
    client: Path, source: Path, workdir: Path, log: procs.CommandLog | None, timeout: float
) -> dict[str, Any]:
    """A first backup into an empty receiver, then an unchanged second invocation."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        state = Path(tmp)
        row: dict[str, Any] = {}
        with (
            Receiver.serving(state / "store", state / "rx.jsonl") as rx,
            Decoy.serving(state / "decoy.jsonl"),
        ):
            for label in ("first_backup", "unchanged"):
                done = procs.run(
                    [str(client), "--source", str(source), "--receiver", rx.address],
                    purpose=f"untraced timing: {client.name} {label}",
                    log=log,
                    stdout=state / f"{label}.stdout",
                    stderr=state / f"{label}.stderr",
                    timeout=timeout,
                    accept=None,
                )
                row[f"{label}_wall"] = done.duration_s
                row[f"{label}_cpu"] = done.cpu_s
                row[f"{label}_exit"] = done.exit_status
    return row


def _sandboxed_round(
    sandbox: Sandbox, name: str, client: Path, data: bytes, workdir: Path, timeout: float
) -> dict[str, Any]:
    """The same round, each invocation in the sandbox (its own cgroup, the pass's network
    namespace, the receiver listening inside it)."""
    row: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(dir=workdir) as tmp,
        sandbox.pass_cell(f"timing-{name}", client=client.resolve(), invocations=2) as cell,
    ):
        state = Path(tmp)
        cell.write_source(data)
        rx_sock, decoy_sock = cell.listening_sockets(2)
        with (
            Receiver.serving(cell.store, state / "rx.jsonl", sock=rx_sock) as rx,
            Decoy.serving(state / "decoy.jsonl", sock=decoy_sock),
        ):
            for index, label in enumerate(("first_backup", "unchanged"), start=1):
                rx.invocation = index
                outcome = cell.run(
                    index,
                    [str(cell.client), "--source", str(cell.source), "--receiver", rx.address],
                    wrap=lambda argv: argv,
                    timeout_s=timeout,
                    stdout=state / f"{label}.stdout",
                    stderr=state / f"{label}.stderr",
                    purpose=f"untraced timing (sandboxed): {name} {label}",
                )
                rx.wait_idle()
                row[f"{label}_wall"] = outcome.wall_s
                row[f"{label}_cpu"] = outcome.cpu_s
                row[f"{label}_exit"] = outcome.exit_status if not outcome.timed_out else "timed out"
    return row


METRICS = ("first_backup_wall", "first_backup_cpu", "unchanged_wall", "unchanged_cpu")


def alternate(
    clients: dict[str, Path],
    *,
    rounds: int,
    size: int,
    workdir: Path,
    log: procs.CommandLog | None = None,
    timeout: float = 60.0,
    seed: str = "timing",
    sandbox: Sandbox | None = None,
    floor: dict[str, str | None] | None = None,
) -> Timing:
    """Run every client ``rounds`` times, in alternation (A B A B …), so that drift in the
    machine's load affects them alike. Returns per-client spreads and, when both a
    ``baseline`` and a ``candidate`` are present, candidate/baseline ratios of the medians.
    A client named ``floor`` is the instrument floor's reference uploader; ``floor`` is its
    identity (``lab.evaluate.floor.Floor.describe``), stored beside the spreads."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "timing-source.bin"
    fixture.write_source(source, seed=seed, size=size)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in clients}
    data = source.read_bytes() if sandbox is not None else b""
    try:
        for _ in range(rounds):
            for name, path in clients.items():
                if sandbox is not None:
                    rows[name].append(_sandboxed_round(sandbox, name, path, data, workdir, timeout))
                else:
                    rows[name].append(_one_round(path, source, workdir, log, timeout))
    finally:
        source.unlink(missing_ok=True)
    spreads: dict[str, ClientTiming] = {}
    for name, runs in rows.items():
        spreads[name] = ClientTiming(
            spreads={metric: spread([r[metric] for r in runs]) for metric in METRICS},
            nonzero_exits=sum(1 for r in runs for k in r if k.endswith("_exit") and r[k]),
        )
    ratio: dict[str, float | None] | None = None
    if "baseline" in rows and "candidate" in rows:
        ratio = {}
        for metric in METRICS:
            base = spreads["baseline"].spreads[metric]
            cand = spreads["candidate"].spreads[metric]
            if base is None or cand is None or base.median <= 0:
                ratio[metric] = None  # undefined, shown as N/A
            else:
                ratio[metric] = round(cand.median / base.median, 4)
    return Timing(
        rounds=rounds,
        size=size,
        method=(
            "untraced; clients alternated; each round = first backup into an empty "
            "receiver + unchanged second invocation; "
            + (
                "each invocation in the sandbox: wall = sandbox spawn to the client's exit "
                "(the sandbox's set-up included, alike for both), cpu = the invocation "
                "cgroup's cpu.stat"
                if sandbox is not None
                else "wall = spawn to reap, cpu = user+sys rusage"
            )
        ),
        clients=spreads,
        ratio=ratio,
        floor=floor,
    )
