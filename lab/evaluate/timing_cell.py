"""A timing round in a sandbox cell of its own (``lab.evaluate.timing``'s rounds with
``sandbox``): the cell is made exactly as a judged pass's is (the same environment, box,
bounds and opaque cgroup names), warmed up with one untimed ``true``, and each of its two
invocations checked as a judged pass checks it (``round_problem``).

    closing = Closing()
    row = sandboxed_round(sandbox, "candidate", client, data, digest, workdir, 60.0, closing)
    closing.settle()          # the last cell is closed (it was closing beside the next)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.host import procs
from lab.host.live import Beside
from lab.model.timing import INVOCATIONS
from lab.sandbox import PassCell, Sandbox
from lab.workloads.backup.backup_check import verify
from lab.workloads.backup.decoy import Decoy
from lab.workloads.backup.receiver import Receiver
from lab.workloads.backup.store import saved_backup

#: the in-memory store's room beyond four copies of the source (a temporary upload, the
#: committed backup, a rejected one, and the records)
STORE_SLACK = 16 << 20


def round_problem(
    label: str,
    *,
    exit_status: int | None,
    timed_out: bool,
    store: Path,
    digest: str,
    source: Path,
    receiver_digest: str | None,
) -> str | None:
    """Why one timed invocation does not count (None when it does): it timed out, exited
    non-zero, or left no backup matching the fixture and the receiver's record."""
    if timed_out:
        return f"{label}: timed out"
    if exit_status != 0:
        return f"{label}: exited {exit_status}"
    check = verify(
        backup=saved_backup(store),
        fixture_sha256=digest,
        source=source,
        receiver_digest=receiver_digest,
    )
    if not check.backup_exists:
        return f"{label}: no backup in the receiver's store"
    if not check.verified:
        return f"{label}: the backup does not match the source and the receiver's record"
    return None


class Closing:
    """The last round's cell, closed on a thread of its own while the next round's cell
    opens: a cell's removal (three unmounts, its network namespace, its scratch directory:
    about 11 ms a cell on the lab's machine) and a cell's opening (about 16 ms) are mostly
    waiting on short commands, and the timing's cores are about half idle. ``settle``
    waits for it, and raises what it raised, before the next cell runs anything: its
    untimed warm-up then also covers what the kernel finishes after a removal (a network
    namespace is torn down by a kernel worker), so nothing of the lab's runs beside a
    timed client. Settled after the warm-up instead, the intervals measured wider
    (docs/performance.md, round 9)."""

    def __init__(self) -> None:
        self._closing: Beside | None = None

    def hand(self, close: Callable[[], None]) -> None:
        """Close a cell on a thread (the one handed before is settled first; if its
        closing failed, this cell is closed here before that error is raised)."""
        try:
            self.settle()
        except BaseException:
            close()
            raise
        self._closing = Beside(close, name="timing cell close")

    def settle(self) -> None:
        """Return once the cell handed last is closed; raise what its closing raised."""
        closing, self._closing = self._closing, None
        if closing is not None:
            closing.join()


def sandboxed_round(
    sandbox: Sandbox,
    name: str,
    client: Path,
    data: bytes,
    digest: str,
    workdir: Path,
    timeout: float,
    closing: Closing | None = None,
    invocations: tuple[str, ...] = INVOCATIONS,
) -> dict[str, Any]:
    """The same round, each invocation in the sandbox (its own cgroup, the pass's network
    namespace, the receiver listening inside it). With ``closing``, the last round's cell
    is settled once this cell is open, before its warm-up, and this cell is handed to it
    to close instead of closing here. ``invocations``: the first of a round's invocations
    to time (``lab.evaluate.timing.later_rounds``)."""
    row: dict[str, Any] = {}
    cell_and_dir = contextlib.ExitStack()
    try:
        tmp = cell_and_dir.enter_context(tempfile.TemporaryDirectory(dir=workdir))
        cell = cell_and_dir.enter_context(
            sandbox.pass_cell(
                f"untraced-{name}", client=client.resolve(), invocations=1 + len(invocations)
            )
        )
        _timed_in(cell, Path(tmp), row, (name, invocations), data, digest, timeout, closing)
    except BaseException:
        cell_and_dir.close()
        raise
    if closing is None:
        cell_and_dir.close()
    else:
        closing.hand(cell_and_dir.close)
    return row


def _timed_in(
    cell: PassCell,
    state: Path,
    row: dict[str, Any],
    timed: tuple[str, tuple[str, ...]],
    data: bytes,
    digest: str,
    timeout: float,
    closing: Closing | None,
) -> None:
    """A round's invocations in its open cell, into ``row``; ``timed``: the client's name
    and which invocations."""
    name, invocations = timed
    cell.write_source(data)
    # a first backup is timed to the receiver's OK, which follows its commit's syncs:
    # into a store in memory, so that the disk's latency (2-30 ms a commit here, the same
    # for every client) is not timed as the client's
    cell.store_in_memory(STORE_SLACK + 4 * len(data))
    rx_sock, decoy_sock = cell.listening_sockets(2)
    with (
        Receiver.serving(cell.store, state / "rx.jsonl", sock=rx_sock) as rx,
        Decoy.serving(state / "decoy.jsonl", sock=decoy_sock),
    ):
        if closing is not None:
            closing.settle()  # the last round's cell is gone before this one runs anything
        row["failed"] = _warm_up(cell, state, timeout)
        for index, label in enumerate(invocations, start=2):
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
            problem = outcome.sandbox_error or round_problem(
                label,
                exit_status=outcome.exit_status,
                timed_out=outcome.timed_out,
                store=cell.store,
                digest=digest,
                source=cell.source,
                receiver_digest=rx.saved_digest,
            )
            if row.get("failed") is None:
                row["failed"] = problem


def _warm_up(cell: Any, state: Path, timeout: float) -> str | None:
    """Run ``true`` through the cell's jail once, untimed, before the timed invocations.

    The first exec chain in a new cell takes about 8 ms longer than the next one, whatever
    the program, and varies by ±40 % (measured on the lab's machine: /bin/true 22 ms, then
    12 ms; a first backup 26 ms with an interquartile range of 23-28 ms, 17 ms and 17.4-18.0 ms
    after this warm-up, 25 rounds each): a cost of the cell, the same for every client, that
    was most of the first backup's spread. ``true`` writes nothing, and runs in an
    invocation cgroup of its own, so the client's invocations see the cell as before.
    Returns why the round cannot count when even this failed."""
    true = os.path.realpath(procs.which("true") or "/usr/bin/true")
    outcome = cell.run(
        1,
        [true],
        wrap=lambda argv: argv,
        timeout_s=timeout,
        stdout=state / "warm-up.stdout",
        stderr=state / "warm-up.stderr",
        purpose="untimed warm-up of a timing cell's jail (true)",
    )
    if outcome.sandbox_error or outcome.timed_out or outcome.exit_status != 0:
        return f"the cell's warm-up failed: {outcome.sandbox_error or outcome.exit_status}"
    return None
