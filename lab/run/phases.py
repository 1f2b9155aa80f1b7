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

The session attaches while the phase before runs and detaches while the phase after runs
(``SharedBatch``): those passes pay its probes' predicate, and are never counted. Its raw
output is kept once, under ``sessions/bpftrace-<N>/``, and split per invocation exactly as
a pass's own session's is (``inv<N>/bpftrace.txt``, by cgroup id); "absent ≠ 0" still
rests on the session's END marker and exit status. Every pass it served records it.

    results = run_phased(runner, units)     # list[ScenarioResult], in the units' order
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from lab.collectors.base import CollectorOutput, SessionContext, Window
from lab.collectors.bpftrace import BpftraceSession
from lab.errors import LabError
from lab.host.live import Beside
from lab.host.procs import CommandLog
from lab.model import Pass, ScenarioResult, SharedSession
from lab.run.plan import Plan
from lab.run.schedule import OVERLAPPING, Spans, lead_first, run_ordered
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
    at_a_time = "one at a time" if jobs == 1 else f"up to {jobs} at a time"
    runner.progress(f"pass {collector}: {total} scenario repetition(s), {at_a_time}")

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
        lead = min(indexes, key=lambda i: _start_order(units[i]), default=None)  # set up alone
        each = lead_first(work, lead) if jobs > 1 and lead is not None else work
        run_ordered(
            indexes,
            each,
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
    passes side by side where ``lab.run.schedule`` allows it (``run_phase``). A unit is
    finished (``Runner.finish_result``, then ``Runner.on_result``) as soon as its last
    phase's pass lands, while the others still run. A run whose bpftrace passes share one
    session attaches it while the phase before bpftrace's runs and detaches it while the
    phase after runs (``SharedBatch``)."""
    passes: list[list[Pass]] = [[] for _ in units]
    results: list[ScenarioResult | None] = [None] * len(units)
    collectors = runner.plan.passes
    sharing = shares_sessions(runner)
    groups = list(batches(units, MAX_SHARED_INVOCATIONS)) if sharing else []
    early: SharedBatch | None = None  # attached ahead of its phase (one batch only)
    #: a session detaching during the phase after its own (completed before that phase's
    #: first pass lands)
    ending: list[SharedBatch] = []

    def landing(final: bool) -> Callable[[int, Pass], None]:
        def landed(index: int, p: Pass) -> None:
            for shared in ending:
                shared.complete()  # the bpftrace passes land before any later one
            passes[index].append(p)
            if final:
                results[index] = _finished(runner, units[index], passes[index])

        return landed

    last, every = len(collectors) - 1, list(range(len(units)))
    try:
        for position, collector in enumerate(collectors):
            following = collectors[position + 1] if position < last else None
            if following == "bpftrace" and len(groups) == 1 and collector != "bpftrace":
                early = SharedBatch(runner, units, groups[0], landing(position + 1 == last))
                early.attach()  # while this phase runs
            if collector == "bpftrace" and sharing:
                for batch in groups:
                    shared = early or SharedBatch(runner, units, batch, landing(position == last))
                    early = None
                    shared.attach()
                    shared.run()
                    if position == last or len(groups) > 1:
                        shared.complete()
                    else:
                        ending.append(shared)  # completes as the next phase's first lands
            else:
                run_phase(runner, units, every, collector, landing(position == last))
            if collector != "bpftrace":
                for shared in ending:
                    shared.complete()
                ending.clear()
    finally:
        for left in [early, *ending]:
            if left is not None:
                left.close()
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


class SharedBatch:
    """One bpftrace session for a batch of bpftrace passes: ``attach`` reserves every
    pass's cgroups here and starts bpftrace on a thread of its own (it compiles and attaches
    for about a second, which the phase before may spend running its passes); ``run`` waits
    for it, runs the passes, and starts the detach on a thread (bpftrace prints its maps
    once stopped, another second, which the phase after may spend); ``complete`` waits for
    that, gives each pass its own invocations' outputs (by cgroup id) and lands it. While
    attached, its probes count only the reserved cgroups: a pass of the phase before or
    after is never counted (it pays the predicate's comparisons in the kernel)."""

    def __init__(
        self,
        runner: Runner,
        units: list[tuple[Scenario, int]],
        batch: list[int],
        landed: Callable[[int, Pass], None],
    ) -> None:
        self.runner, self.units, self.batch, self.landed = runner, units, batch, landed
        self.reservations: dict[int, Reservation] = {}
        self.windows: dict[int, list[Window]] = {}
        self.session: BpftraceSession | None = None
        self.record: SharedSession | None = None
        self.client: Path | None = None
        self.error: str | None = None
        self.ran: dict[int, Pass] = {}
        self.outputs: dict[int, CollectorOutput] = {}
        self._attaching = self._detaching = cast(Beside | None, None)
        self._attached = self._done = False  # attach() and complete() run once each

    def attach(self) -> None:
        if self._attached:
            return
        self._attached = True
        runner, sandbox = self.runner, self.runner.sandbox
        assert sandbox is not None  # shares_sessions() checked it
        try:
            for index in self.batch:
                chosen, rep = self.units[index]
                if chosen.name in runner.skipping:
                    continue  # run_unit_pass records it as skipped
                held = sandbox.reserve(
                    f"{chosen.name}-r{rep}-bpftrace", invocations=chosen.invocations
                )
                self.reservations[index] = held
                evidence = runner.base_dir(chosen, rep) / "bpftrace"
                self.windows[index] = [
                    Window(index=k, out_dir=evidence / f"inv{k}", cgroup_path=group.v2,
                           cgroup_id=group.id)
                    for k, group in sorted(held.groups.items())
                ]  # fmt: skip
            if not self.windows:
                return  # every unit of the batch is skipped: no session
            self.client = sandbox.shared_client(runner.plan.client.resolve())
            out_dir = _session_dir(runner.run_dir)
            every = [w for index in self.batch for w in self.windows.get(index, [])]
            self.record = SharedSession(
                collector="bpftrace",
                directory=str(out_dir.relative_to(runner.run_dir)),
                passes=len(self.windows),
                invocations=len(every),
            )
            scope = f"{len(self.windows)} passes ({len(every)} invocations)"
            self.session = BpftraceSession(scope=scope)
            runner.progress(f"pass bpftrace: one bpftrace session for {scope}; attaching")
            context = SessionContext(
                run_dir=runner.run_dir,
                out_dir=out_dir,
                client_path=self.client,
                log=runner.log,
                windows=every,
            )
            self._attaching = Beside(lambda: self._start(context), name="lab-bpftrace-session")
        except BaseException:
            self.close()
            raise

    def _start(self, context: SessionContext) -> None:
        assert self.session is not None and self.record is not None
        t0 = time.monotonic()
        try:
            self.session.start(context)
            self.record.attach_s = time.monotonic() - t0
        except LabError as exc:
            # a tracer that cannot attach fails its own passes, never the run
            self.error = f"bpftrace could not start: {exc}"

    def run(self) -> None:
        runner = self.runner
        if self.session is None:
            # every unit of the batch is skipped (an earlier pass timed out): each says so
            run_phase(runner, self.units, self.batch, "bpftrace", self.ran.__setitem__)
            return
        assert self._attaching is not None and self.record is not None
        self._attaching.join()
        if self.error is not None:
            runner.progress(f"    {self.error}")
        else:
            runner.progress(f"    bpftrace attached in {self.record.attach_s or 0:.1f} s")

        def slot(index: int) -> SharedSlot | None:
            held_by = self.reservations.get(index)
            if held_by is None or self.record is None or self.client is None:
                return None
            return SharedSlot(self.record, self.client, held_by, self.error)

        try:
            # its passes may overlap: its probes tell invocations apart by cgroup
            run_phase(runner, self.units, self.batch, "bpftrace", self.ran.__setitem__, shared=slot)
        finally:
            self._detaching = Beside(self._stop, name="lab-bpftrace-session")

    def _stop(self) -> None:
        assert self.session is not None and self.record is not None
        t1 = time.monotonic()
        self.outputs = self.session.stop_by_cgroup()
        if self.record.attach_s is not None:
            self.record.stop_s = time.monotonic() - t1

    def complete(self) -> None:
        """Wait for the detach, attach each pass's outputs and land it (once)."""
        if self._done:
            return
        self._done = True
        try:
            if self._detaching is not None:
                self._detaching.join()
                if self.record is not None and self.record.stop_s is not None:
                    self.runner.progress(f"    bpftrace stopped in {self.record.stop_s:.1f} s")
            for index in self.batch:
                p = self.ran[index]
                if self.record is not None and p.session is self.record:
                    by_index = {
                        w.index: self.outputs[w.cgroup_id]
                        for w in self.windows[index]
                        if w.cgroup_id is not None and w.cgroup_id in self.outputs
                    }
                    self.runner.attach_outputs(p, {"bpftrace": by_index})
                self.landed(index, p)
        finally:
            self.close()

    def close(self) -> None:
        """However the run ends: bpftrace stopped, its threads joined, every reserved
        cgroup no cell took removed."""
        for work in (self._attaching, self._detaching):
            if work is not None:
                work.join(raise_error=False)
        if self._detaching is None and self.session is not None and self._attaching is not None:
            with contextlib.suppress(Exception):
                self.session.stop_by_cgroup()  # attached, but its phase never ran
        for held in self.reservations.values():
            held.release()
        self.reservations.clear()
