"""A run in phases: every scenario repetition's pass under one collector, then the next
collector's. It is how a run goes when bpftrace is among its passes and the sandbox is on,
because then one bpftrace session serves every bpftrace pass of the run (up to
``MAX_SHARED_INVOCATIONS`` invocation cgroups a session) instead of one session each.

Starting and stopping bpftrace is most of a bpftrace pass (about 2 s of 2.3 s on the lab's
machine: compiling, attaching and detaching a dozen probes), not the observation. A session
can be shared because both of its attributions survive it:

* its probes are filtered to, and its maps keyed by, invocation cgroup ids, so every
  pass's cgroups are made before the session starts (``Sandbox.reserve``) and the session
  is given all of them; nothing of another pass, of the lab or of the machine is counted;
* its uprobes attach to a file's inode, so every pass runs the same inode: the run's one
  copy of the client, hard-linked into each pass's box (``Sandbox.shared_client``). A pass
  whose box ended up with another inode (a copy across file systems) is given a session of
  its own, never the shared one's silence.

Only bpftrace passes run while the session is attached (the phases run one after another),
so nothing else of the run is slowed by its probes. Its raw output is kept once, under
``sessions/bpftrace-<N>/``, and split per invocation exactly as a pass's own session's is
(``inv<N>/bpftrace.txt``, by cgroup id); "absent ≠ 0" still rests on the session's END
marker and exit status. Every pass it served records it (``Pass.session``).

    results = run_phased(runner, units)     # list[ScenarioResult], in the units' order
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lab.collectors.base import CollectorOutput, SessionContext, Window
from lab.collectors.bpftrace import BpftraceSession
from lab.errors import LabError
from lab.host.procs import CommandLog
from lab.model import Pass, ScenarioResult, SharedSession
from lab.run.plan import Plan
from lab.sandbox import Reservation, Sandbox
from lab.workloads.backup.scenario import Scenario

#: the most invocation cgroups one shared session filters on (each is one comparison in
#: every probe's predicate); a run with more gets one session per batch of passes
MAX_SHARED_INVOCATIONS = 64
SESSIONS_DIR = "sessions"


@dataclass
class SharedSlot:
    """What one pass of a shared phase is handed: the session (or why it could not
    start), the inode its uprobes attached to, and the pass's reserved cgroups."""

    record: SharedSession
    client: Path
    reservation: Reservation
    error: str | None


class Runner(Protocol):
    """What a phased run needs of ``lab.run.runner.Runner``."""

    plan: Plan
    run_dir: Path
    sandbox: Sandbox | None
    log: CommandLog
    skipping: dict[str, str]
    progress: Callable[[str], None]

    def overlap_untraced(self, units: list[tuple[Scenario, int]]) -> list[Pass]: ...

    def run_unit_pass(
        self, scenario: Scenario, rep: int, collector_name: str, *, shared: SharedSlot | None = None
    ) -> Pass: ...

    def new_result(self, scenario: Scenario, rep: int) -> ScenarioResult: ...

    def finish_result(self, result: ScenarioResult) -> None: ...

    def base_dir(self, scenario: Scenario, rep: int) -> Path: ...

    def attach_outputs(
        self, p: Pass, sessions: dict[str, dict[int, CollectorOutput] | str]
    ) -> None: ...


def shares_sessions(runner: Runner) -> bool:
    """Whether the run goes in phases with one bpftrace session per phase batch."""
    return runner.sandbox is not None and "bpftrace" in runner.plan.passes


def batches(units: list[tuple[Scenario, int]], limit: int) -> Iterator[list[int]]:
    """Unit indexes in order, cut so that no batch holds more than ``limit`` invocations
    (a unit with more than ``limit`` is a batch of its own)."""
    batch: list[int] = []
    held = 0
    for index, (scenario, _) in enumerate(units):
        if batch and held + scenario.invocations > limit:
            yield batch
            batch, held = [], 0
        batch.append(index)
        held += scenario.invocations
    if batch:
        yield batch


def run_phased(runner: Runner, units: list[tuple[Scenario, int]]) -> list[ScenarioResult]:
    passes: list[list[Pass]] = [[] for _ in units]
    total = len(units)
    for collector in runner.plan.passes:
        if collector == "none" and runner.plan.jobs > 1 and total > 1:
            for index, first in enumerate(runner.overlap_untraced(units)):
                passes[index].append(first)
        elif collector == "bpftrace":
            for batch in batches(units, MAX_SHARED_INVOCATIONS):
                _shared_batch(runner, units, batch, passes)
        else:
            runner.progress(f"pass {collector}: {total} scenario repetition(s), one at a time")
            for index, (chosen, rep) in enumerate(units):
                runner.progress(f"[{index + 1}/{total}] {chosen.name} (repetition {rep})")
                passes[index].append(runner.run_unit_pass(chosen, rep, collector))
    results: list[ScenarioResult] = []
    for (chosen, rep), ran in zip(units, passes, strict=True):
        result = runner.new_result(chosen, rep)
        result.passes = ran
        # the time its passes took, each measured on its own (they did not run back to back)
        result.wall_s = sum(p.wall_s for p in ran)
        runner.finish_result(result)
        results.append(result)
    return results


def _session_dir(run_dir: Path) -> Path:
    # several runners may share a run directory (an evaluation's instrument check, then the
    # candidate): never reuse an earlier session's directory
    root = run_dir / SESSIONS_DIR
    root.mkdir(parents=True, exist_ok=True)
    number = 1
    while (root / f"bpftrace-{number}").exists():
        number += 1
    path = root / f"bpftrace-{number}"
    path.mkdir()
    return path


def _shared_batch(
    runner: Runner,
    units: list[tuple[Scenario, int]],
    batch: list[int],
    passes: list[list[Pass]],
) -> None:
    sandbox = runner.sandbox
    assert sandbox is not None  # shares_sessions() checked it
    total = len(units)
    reservations: dict[int, Reservation] = {}
    windows: dict[int, list[Window]] = {}
    try:
        for index in batch:
            chosen, rep = units[index]
            if chosen.name in runner.skipping:
                continue  # run_unit_pass records it as skipped
            held = sandbox.reserve(f"{chosen.name}-r{rep}-bpftrace", invocations=chosen.invocations)
            reservations[index] = held
            evidence = runner.base_dir(chosen, rep) / "bpftrace"
            windows[index] = [
                Window(
                    index=k,
                    out_dir=evidence / f"inv{k}",
                    cgroup_path=group.v2,
                    cgroup_id=group.id,
                )
                for k, group in sorted(held.groups.items())
            ]
        if not windows:
            # every unit of the batch is skipped (an earlier pass timed out): each says so
            for index in batch:
                chosen, rep = units[index]
                passes[index].append(runner.run_unit_pass(chosen, rep, "bpftrace"))
            return
        client = sandbox.shared_client(runner.plan.client.resolve())
        out_dir = _session_dir(runner.run_dir)
        every = [w for index in batch for w in windows.get(index, [])]
        record = SharedSession(
            collector="bpftrace",
            directory=str(out_dir.relative_to(runner.run_dir)),
            passes=len(windows),
            invocations=len(every),
        )
        scope = f"{len(windows)} passes ({len(every)} invocations)"
        session = BpftraceSession(scope=scope)
        error: str | None = None
        runner.progress(f"pass bpftrace: one bpftrace session for {scope}; attaching")
        t0 = time.monotonic()
        try:
            session.start(
                SessionContext(
                    run_dir=runner.run_dir,
                    out_dir=out_dir,
                    client_path=client,
                    log=runner.log,
                    windows=every,
                )
            )
            record.attach_s = time.monotonic() - t0
            runner.progress(f"    bpftrace attached in {record.attach_s:.1f} s")
        except LabError as exc:
            # a tracer that cannot attach fails its own passes, never the run
            error = f"bpftrace could not start: {exc}"
            runner.progress(f"    {error}")
        outputs: dict[int, CollectorOutput] = {}
        try:
            for index in batch:
                chosen, rep = units[index]
                runner.progress(f"[{index + 1}/{total}] {chosen.name} (repetition {rep})")
                held_by = reservations.get(index)
                slot = SharedSlot(record, client, held_by, error) if held_by is not None else None
                passes[index].append(runner.run_unit_pass(chosen, rep, "bpftrace", shared=slot))
        finally:
            t1 = time.monotonic()
            outputs = session.stop_by_cgroup()
            if record.attach_s is not None:
                record.stop_s = time.monotonic() - t1
                runner.progress(f"    bpftrace stopped in {record.stop_s:.1f} s")
        for index in batch:
            ran = passes[index][-1]
            if ran.session is not record:
                continue  # skipped, or given a session of its own
            by_index = {
                w.index: outputs[w.cgroup_id]
                for w in windows[index]
                if w.cgroup_id is not None and w.cgroup_id in outputs
            }
            runner.attach_outputs(ran, {"bpftrace": by_index})
    finally:
        for held in reservations.values():
            held.release()
