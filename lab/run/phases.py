"""A run in phases: every scenario repetition's pass under one collector, then the next
collector's. It is how a run goes when its passes may overlap (``--jobs N``: within a phase,
up to N passes of different scenario repetitions at a time, ``lab.run.schedule``), and when
bpftrace is among its passes and the sandbox is on, because then one bpftrace session serves
every bpftrace pass of the run (up to ``MAX_SHARED_INVOCATIONS`` invocation cgroups a
session) instead of one session each. A scenario repetition is finished, and handed to the
pipeline's judge, as soon as its last pass lands (``Runner.on_result``).

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
so nothing else of the run is slowed by its probes; those passes may overlap one another
(each invocation is its own cgroup, which is how the session tells them apart). Its raw
output is kept once, under
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
from lab.run.schedule import OVERLAPPING, Spans, run_ordered
from lab.sandbox import Reservation, Sandbox
from lab.workloads.backup.endpoint import passes_at_once
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

    on_result: Callable[[ScenarioResult], None] | None
    spans: Spans

    def abort(self) -> None: ...

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


def run_phase(
    runner: Runner,
    units: list[tuple[Scenario, int]],
    indexes: list[int],
    collector: str,
    landed: Callable[[int, Pass], None],
    *,
    shared: Callable[[int], SharedSlot | None] | None = None,
) -> None:
    """One phase: the ``collector`` pass of each unit in ``indexes``, up to ``--jobs`` at a
    time where ``lab.run.schedule`` lets that collector's passes overlap (one at a time
    otherwise), the longest first; ``landed(index, pass)`` is called on this thread as each
    one ends, with its ``concurrent`` flag final."""
    jobs = runner.plan.jobs if collector in OVERLAPPING else 1
    if runner.sandbox is not None:
        # one client user per pass at once (Sandbox.use_slots): never more passes than users
        jobs = min(jobs, len(runner.sandbox.slot_users))
    total = len(indexes)
    finished: list[int] = []
    if jobs == 1:
        runner.progress(f"pass {collector}: {total} scenario repetition(s), one at a time")

    def work(index: int) -> Pass:
        chosen, rep = units[index]
        slot = shared(index) if shared is not None else None
        key = runner.spans.begin()
        try:
            p = runner.run_unit_pass(chosen, rep, collector, shared=slot)
        finally:
            beside = runner.spans.end(key)
        p.concurrent = beside
        return p

    def done(position: int, p: Pass) -> None:
        index = indexes[position]
        finished.append(index)
        chosen, rep = units[index]
        at_once = f" (up to {jobs} passes at a time)" if jobs > 1 else ""
        runner.progress(
            f"[{len(finished)}/{total}] {chosen.name} (repetition {rep}): pass {collector} "
            f"done in {p.wall_s:.2f} s{at_once}"
        )
        landed(index, p)

    passes_at_once(jobs)
    try:
        run_ordered(
            indexes,
            work,
            jobs=jobs,
            done=done,
            abort=runner.abort,
            first=lambda index: _start_order(units[index]),
        )
    finally:
        passes_at_once(1)


def _start_order(unit: tuple[Scenario, int]) -> tuple[float, int]:
    """The longest passes first (by what the scenario's own expectations promise), then the
    first repetition of every scenario before any second: a candidate that hangs under a
    condition times out once per condition at the same time, never three times in a row
    (its later repetitions of that condition are then skipped)."""
    chosen, rep = unit
    return (-chosen.expected_client_wall_s(), rep)


def run_phased(runner: Runner, units: list[tuple[Scenario, int]]) -> list[ScenarioResult]:
    """Every unit's pass under one collector, then the next collector's; each phase's
    passes side by side where ``lab.run.schedule`` allows it (``Runner.run_phase``). A unit
    is finished (``Runner.finish_result``, then ``Runner.on_result``) as soon as its last
    phase's pass lands, while the others still run."""
    passes: list[list[Pass]] = [[] for _ in units]
    results: list[ScenarioResult | None] = [None] * len(units)
    collectors = runner.plan.passes
    for position, collector in enumerate(collectors):
        final = position == len(collectors) - 1

        def landed(index: int, p: Pass, final: bool = final) -> None:
            passes[index].append(p)
            if final:
                results[index] = _finished(runner, units[index], passes[index])

        if collector == "bpftrace" and shares_sessions(runner):
            for batch in batches(units, MAX_SHARED_INVOCATIONS):
                _shared_batch(runner, units, batch, landed)
        else:
            run_phase(runner, units, list(range(len(units))), collector, landed)
    done = [r for r in results if r is not None]
    assert len(done) == len(units), "a unit of the run has no result (a lab bug)"
    return done


def _finished(runner: Runner, unit: tuple[Scenario, int], ran: list[Pass]) -> ScenarioResult:
    chosen, rep = unit
    result = runner.new_result(chosen, rep)
    result.passes = ran
    # the time its passes took, each measured on its own (they did not run back to back)
    result.wall_s = sum(p.wall_s for p in ran)
    runner.finish_result(result)
    if runner.on_result is not None:
        runner.on_result(result)
    return result


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
    landed: Callable[[int, Pass], None],
) -> None:
    sandbox = runner.sandbox
    assert sandbox is not None  # shares_sessions() checked it
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
            run_phase(runner, units, batch, "bpftrace", landed)
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
        ran: dict[int, Pass] = {}

        def slot(index: int) -> SharedSlot | None:
            held_by = reservations.get(index)
            return SharedSlot(record, client, held_by, error) if held_by is not None else None

        try:
            # the session's passes may overlap: its probes tell invocations apart by cgroup
            run_phase(runner, units, batch, "bpftrace", ran.__setitem__, shared=slot)
        finally:
            t1 = time.monotonic()
            outputs = session.stop_by_cgroup()
            if record.attach_s is not None:
                record.stop_s = time.monotonic() - t1
                runner.progress(f"    bpftrace stopped in {record.stop_s:.1f} s")
        for index in batch:
            p = ran[index]
            if p.session is record:  # not skipped, nor given a session of its own
                by_index = {
                    w.index: outputs[w.cgroup_id]
                    for w in windows[index]
                    if w.cgroup_id is not None and w.cgroup_id in outputs
                }
                runner.attach_outputs(p, {"bpftrace": by_index})
            landed(index, p)
    finally:
        for held in reservations.values():
            held.release()
