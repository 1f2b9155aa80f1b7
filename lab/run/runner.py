"""The runner: executes scenarios pass by pass, invocation by invocation, every invocation
in its sandbox, and produces the results model *unjudged* (``lab.pipeline`` calls
the judges). It formats nothing; presenters draw what it returns.

    plan = Plan(scenarios=[...], passes=["none", "strace"], packets="best-effort", ...)
    with Runner(plan, run_dir, observers=doctor.observers, sandbox=sandbox) as runner:
        results = runner.run()            # list[ScenarioResult], verdicts not yet set

A pass is one complete execution of a scenario (fresh state, fresh namespace, every
invocation) under one tracer. The packet capture attaches once per pass, bpftrace once per
pass or once for every bpftrace pass of the run (``lab.run.phases``); wrapping tracers
(strace, perf) wrap each invocation. A client that times out costs one time-out: the
remaining passes of that condition are skipped and say why. The plan is ``lab.run.plan``;
an invocation's command line, claim and records are built by ``lab.run.invocation``.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from lab.collectors import is_session, process_collector
from lab.collectors.base import (
    CollectorOutput,
    InvocationContext,
    PassContext,
    ProcessCollector,
    Window,
)
from lab.errors import ClientError, LabError
from lab.host import procs
from lab.host.clock import now_rfc3339
from lab.model import Invocation, ObserverStatus, Pass, ScenarioResult
from lab.run import phases, schedule
from lab.run.deferred import Deferred, deferrable
from lab.run.hostcell import HostCell
from lab.run.invocation import (
    attach_outputs,
    claim_lines,
    client_argv,
    current_source_digest,
    parse_claim,
    record_output,
    sandbox_problem,
    sandbox_record,
    tracer_hooks,
)
from lab.run.phases import SharedSlot
from lab.run.plan import Plan
from lab.run.schedule import Cancelled, Spans, cores
from lab.run.sessions import pass_sessions
from lab.run.timeline import Timeline, client_rows, endpoint_rows
from lab.run.timeline_sources import add_observed
from lab.sandbox import Reservation, Sandbox
from lab.workloads.backup import backup_check, fixture, receiver
from lab.workloads.backup.decoy import Decoy
from lab.workloads.backup.scenario import Scenario

Progress = Callable[[str], None]
EVENTS_KEPT = 100


class Runner:
    def __init__(
        self,
        plan: Plan,
        run_dir: Path,
        *,
        observers: dict[str, ObserverStatus],
        sandbox: Sandbox | None,
        progress: Progress | None = None,
        on_result: Callable[[ScenarioResult], None] | None = None,
        on_start: Callable[[], None] | None = None,
    ) -> None:
        self.plan = plan
        self.on_start = on_start  # called once, as the first client runs: client_started
        self._start_lock = threading.Lock()
        self.run_dir = run_dir
        self.observers = observers
        self.sandbox = sandbox
        self.progress = progress or (lambda _msg: None)
        self.log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
        self.timeline_path = run_dir / "timeline.jsonl"
        #: scenario name -> why its remaining passes are skipped (it timed out)
        self.skipping: dict[str, str] = {}
        #: set when the run is stopping (an error or an interrupt while passes overlap):
        #: no pass or invocation starts after it
        self.cancelled = threading.Event()
        #: each pass's thread holds its own perf queue (lab.run.deferred), drained at its end
        self._local = threading.local()
        #: called on this thread with each scenario repetition as soon as its last pass is
        #: done (the pipeline judges it and writes its result.json while others still run)
        self.on_result = on_result
        #: every pass begun, for its ``concurrent`` flag (lab.run.schedule)
        self.spans = Spans()
        self.timeline = Timeline(self.timeline_path)
        #: the processes this run started (set on ``__enter__``)
        self.scope: procs.ProcessScope | None = None
        self._scope_block: contextlib.AbstractContextManager[procs.ProcessScope]

    @property
    def deferred(self) -> Deferred | None:
        """The perf queue of the pass running on this thread (None outside a perf pass)."""
        queue: Deferred | None = getattr(self._local, "deferred", None)
        return queue

    @deferred.setter
    def deferred(self, queue: Deferred | None) -> None:
        self._local.deferred = queue

    def __enter__(self) -> Runner:
        # the processes this run starts (on this thread and its pass workers) are its own:
        # stopping them must not stop others the lab runs beside it (an agent, when a
        # snapshot is judged while it works)
        self._scope_block = procs.process_scope()
        self.scope = self._scope_block.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Whatever happened (an error, Ctrl-C), no process this run started outlives it.
        try:
            procs.stop_all(scope=self.scope)
            self.flush_timeline()
        finally:
            self._scope_block.__exit__(exc_type, exc, tb)

    # -- timeline --------------------------------------------------------------------------

    def flush_timeline(self) -> None:
        self.timeline.flush()

    # -- execution -------------------------------------------------------------------------

    def check_client(self) -> None:
        client = self.plan.client
        if not client.is_file():
            raise ClientError(
                f"{client}: the client binary does not exist; build it with 'make -C native'."
            )

    def run(self) -> list[ScenarioResult]:
        self.check_client()
        by_name = {s.name: s for s in self.plan.scenarios}
        reps = range(1, self.plan.repetitions + 1)
        named = self.plan.units or [(s.name, r) for s in self.plan.scenarios for r in reps]
        units = [(by_name[name], rep) for name, rep in named]
        overlapping = self.plan.jobs > 1 and len(units) > 1
        if overlapping or phases.shares_sessions(self):
            # passes side by side (--jobs N), or one bpftrace session for every bpftrace
            # pass: either way, phase by phase across the units (lab.run.phases)
            return phases.run_phased(self, units)
        results: list[ScenarioResult] = []
        for n, (chosen, rep) in enumerate(units, start=1):
            self.progress(f"[{n}/{len(units)}] {chosen.name} (repetition {rep})")
            results.append(self.run_scenario(chosen, rep))
            if self.on_result is not None:
                self.on_result(results[-1])
        return results

    def new_result(self, scenario: Scenario, rep: int) -> ScenarioResult:
        return ScenarioResult(
            name=scenario.name,
            repetition=rep,
            description=scenario.description,
            scenario_file=f"scenarios/{scenario.path.name}",
            passes=[],
        )

    def base_dir(self, scenario: Scenario, rep: int) -> Path:
        return self.run_dir / scenario.name / f"r{rep}"

    def _seed(self, scenario: Scenario, rep: int) -> str:
        return f"{self.plan.seed}:{scenario.name}:r{rep}"

    def finish_result(self, result: ScenarioResult) -> None:
        # Only the untraced pass failing means the scenario did not execute; a tracer's
        # failure is recorded in its pass and in each invocation's "missing" reasons.
        result.error = next(
            (p.error for p in result.passes if p.error and p.collector == "none"), None
        )
        # the timeline file is written once, when the runner exits (every write rewrites it
        # whole, sorted; once per scenario repetition it grew as the square of the run)
        add_observed(self.timeline, self.run_dir, result)

    def run_scenario(self, scenario: Scenario, rep: int) -> ScenarioResult:
        t0 = time.monotonic()
        result = self.new_result(scenario, rep)
        for collector_name in self.plan.passes:
            self.progress(f"    pass {collector_name}")
            result.passes.append(self.run_unit_pass(scenario, rep, collector_name))
        result.wall_s = time.monotonic() - t0
        self.finish_result(result)
        return result

    def run_unit_pass(
        self, scenario: Scenario, rep: int, collector_name: str, *, shared: SharedSlot | None = None
    ) -> Pass:
        """``run_pass`` with the unit's own evidence directory and seed."""
        base, seed = self.base_dir(scenario, rep), self._seed(scenario, rep)
        return self.run_pass(scenario, rep, collector_name, base, seed, shared=shared)

    def client_started(self) -> None:
        """A client runs: the first call begins ``on_start``, on a thread (the watch timing
        the client goes on); a phase's longest pass lets the others start (lab.run.schedule)."""
        schedule.client_running()
        with self._start_lock:
            started, self.on_start = self.on_start, None
        if started is not None:
            threading.Thread(target=started, name="lab-beside", daemon=True).start()

    def abort(self) -> None:
        """Stop overlapping passes: none starts after this, every running process is stopped
        (the workers then close their own cells, cgroups and namespaces)."""
        self.cancelled.set()
        procs.stop_all(grace_s=0.5, scope=self.scope)

    @contextlib.contextmanager
    def _cell(
        self, tag: str, invocations: int, reserved: Reservation | None = None
    ) -> Iterator[Any]:
        if self.sandbox is None:
            with HostCell.opened(
                client=self.plan.client, invocations=invocations, log=self.log
            ) as host:
                yield host
        else:
            with self.sandbox.pass_cell(
                tag, client=self.plan.client.resolve(), invocations=invocations, reserved=reserved
            ) as cell:
                yield cell

    def run_pass(
        self,
        scenario: Scenario,
        rep: int,
        collector_name: str,
        base: Path,
        seed: str,
        *,
        shared: SharedSlot | None = None,
    ) -> Pass:
        # Evidence (records, client output, tracer output) goes under the run directory;
        # bulky state (the source file, the receiver's store) lives in the pass's scratch
        # directory, removed after the pass: the backup check has recorded its digests,
        # and the source can be regenerated from its seed (lab.workloads.backup.fixture).
        if self.cancelled.is_set():
            raise Cancelled("the run is stopping")
        evidence = base / collector_name
        evidence.mkdir(parents=True, exist_ok=True)
        skipped = self.skipping.get(scenario.name)
        if skipped is not None:
            return Pass(
                collector=collector_name,
                invocations=[],
                receiver_address="",
                decoy_address="",
                skipped=skipped,
                sandboxed=self.sandbox is not None,
            )
        t0 = time.monotonic()
        tag = f"{scenario.name}-r{rep}-{collector_name}"
        reserved = shared.reservation if shared is not None else None
        with self._cell(tag, scenario.invocations, reserved) as cell:
            # the queue of this pass, on its own thread (deferred.py)
            queue = self.deferred = Deferred(cores()) if deferrable(collector_name) else None
            try:
                p = self._run_pass(scenario, rep, collector_name, seed, evidence, cell, shared)
                queue.finish() if queue else None  # in the box perf resolves symbols in
            finally:
                self.deferred = None
        p.wall_s = time.monotonic() - t0
        return p

    def _run_pass(
        self,
        scenario: Scenario,
        rep: int,
        collector_name: str,
        seed: str,
        evidence: Path,
        cell: Any,
        shared: SharedSlot | None = None,
    ) -> Pass:
        data = fixture.source_bytes(seed, self.plan.size)
        source_digest = hashlib.sha256(data).hexdigest()
        cell.write_source(data)
        del data
        labels = {"scenario": scenario.name, "repetition": rep, "pass": collector_name}
        rx_sock, decoy_sock = cell.listening_sockets(2)
        with (
            receiver.Receiver.serving(
                cell.store, evidence / "receiver.jsonl", faults=scenario.faults, sock=rx_sock
            ) as rx,
            Decoy.serving(evidence / "decoy.jsonl", sock=decoy_sock) as decoy,
        ):
            p = Pass(
                collector=collector_name,
                invocations=[],
                receiver_address=rx.address,
                decoy_address=decoy.address,
                source_seed=seed,
                source_sha256=source_digest,
                source_size=self.plan.size,
                sandboxed=self.sandbox is not None,
                netns=cell.netns_name,
            )
            windows = []
            for index in range(1, scenario.invocations + 1):
                group = cell.group(index)
                windows.append(
                    Window(
                        index=index,
                        out_dir=evidence / f"inv{index}",
                        cgroup_path=group.v2 if group is not None else None,
                        cgroup_id=group.id if group is not None else None,
                    )
                )
            pctx = PassContext(
                run_dir=self.run_dir,
                out_dir=evidence,
                client_path=cell.client,
                source_path=cell.source,
                receiver_address=("127.0.0.1", rx.port),
                decoy_address=("127.0.0.1", decoy.port),
                log=self.log,
                netns_argv=cell.netns_argv,
                windows=windows,
            )
            if scenario.preload == "older":
                p.preload_sha256 = rx.preload(fixture.older_backup(seed, self.plan.size))
            with pass_sessions(
                pctx,
                collector_name,
                p,
                shared,
                cell,
                packets=self.plan.packets,
                observers=self.observers,
            ) as sessions:
                tracer = (
                    process_collector(collector_name)()
                    if collector_name != "none" and not is_session(collector_name)
                    else None
                )
                for window in windows if p.error is None else []:
                    if self.cancelled.is_set():
                        raise Cancelled("the run is stopping")
                    rx.invocation = decoy.invocation = window.index
                    if window.index in scenario.source_changes:
                        changed = fixture.source_bytes(f"{seed}/v{window.index}", self.plan.size)
                        source_digest = hashlib.sha256(changed).hexdigest()
                        cell.write_source(changed)
                        del changed
                        p.source_changes[window.index] = source_digest
                    held = rx.saved_digest == source_digest
                    try:
                        inv = self.run_invocation(
                            scenario, p, tracer, window, cell, (rx, decoy), held, labels
                        )
                    except LabError as exc:
                        if tracer is None:
                            raise
                        # A tracer that cannot even start (a client path it cannot take, a
                        # tool gone missing) fails its own pass, never the run.
                        p.error = f"{tracer.name} could not run invocation {window.index}: {exc}"
                        break
                    p.invocations.append(inv)
                    if inv.claim.timed_out:
                        self.skipping[scenario.name] = (
                            f"skipped: invocation {window.index} of repetition {rep} timed out "
                            f"after {self.plan.timeout_s:g} s in the {collector_name} pass, and a "
                            "client that never exits costs one time-out, not one per pass"
                        )
                        break
            rx.invocation = decoy.invocation = 0
            self.attach_outputs(p, sessions)
        endpoint_rows(self.timeline, rx.records + decoy.records, labels)
        return p

    #: the phases (lab.run.phases) file a shared session's outputs through the runner
    attach_outputs = staticmethod(attach_outputs)

    def run_invocation(
        self,
        scenario: Scenario,
        p: Pass,
        tracer: ProcessCollector | None,
        window: Window,
        cell: Any,
        endpoints: tuple[receiver.Receiver, Decoy],
        held: bool,
        labels: dict[str, Any],
    ) -> Invocation:
        rx, decoy = endpoints
        index = window.index
        addresses = {"receiver": rx.address, "decoy": decoy.address}
        inv_dir = window.out_dir
        inv_dir.mkdir(parents=True, exist_ok=True)
        ctx = InvocationContext(
            run_dir=self.run_dir,
            out_dir=inv_dir,
            client_path=cell.client,
            source_path=cell.source,
            source_size=self.plan.size,
            receiver_port=rx.port,
            decoy_port=decoy.port,
            invocation=index,
            log=self.log,
            timeout_s=self.plan.timeout_s,
            scratch=cell.scratch,
        )
        argv = client_argv(self.plan, scenario, cell.client, cell.source, addresses)
        window.start = time.time()
        self.timeline.add(
            "runner",
            "client-start",
            time.monotonic_ns(),
            **labels,
            invocation=index,
            source_time=now_rfc3339(),
        )
        wrap, attach = tracer_hooks(tracer, ctx, gated=cell.gated)
        outcome = cell.run(
            index,
            argv,
            wrap=wrap,
            timeout_s=self.plan.timeout_s,
            stdout=inv_dir / "client.stdout",
            stderr=inv_dir / "client.stderr",
            purpose=f"client invocation {index} ({labels['scenario']}, pass {p.collector})",
            started=self.client_started,
            attach=attach,
        )
        exited_ns = time.monotonic_ns()
        ctx.client_pid = outcome.main_pid
        problem = sandbox_problem(outcome, index)
        if problem is not None:
            raise problem
        # The endpoints may still be finishing the last connection's records.
        for endpoint in (rx, decoy):
            if not endpoint.wait_idle():
                endpoint.record("still-busy", why="connection still open 5 s after client exit")
        window.end = time.time()
        tracer_out: CollectorOutput | None = None
        later = self.deferred is not None and tracer is not None and tracer.deferrable
        if tracer is not None and outcome.wrapper is not None and not later:
            tracer_out = tracer.collect(ctx, outcome.wrapper)
            if tracer_out.error is not None:
                # A tracer that failed, crashed or hung taints its whole pass: the client
                # may have been killed with it. The pass is kept as evidence but not judged.
                p.error = (
                    p.error or f"{tracer.name} failed in invocation {index}: {tracer_out.error}"
                )
        claim = parse_claim((inv_dir / "client.stdout").read_bytes(), outcome)
        client_rows(self.timeline, claim_lines(outcome), exited_ns, claim, labels, index)
        check = backup_check.verify(
            backup=rx.store_dir / receiver.BACKUP_NAME,
            fixture_sha256=current_source_digest(p, index),
            source=cell.source,
            receiver_digest=rx.saved_digest,
        )
        self.timeline.add(
            "verifier",
            "check",
            time.monotonic_ns(),
            **labels,
            invocation=index,
            source_time=check.checked_at,
            **check.to_dict(),
        )
        inv = Invocation(
            index=index,
            claim=claim,
            verifier=check,
            receiver=rx.summary(index, held_at_start=held),
            decoy=decoy.summary(index),
            sandbox=sandbox_record(outcome, cell, index),
        )
        inv.artifacts["client"] = [
            ctx.relative(inv_dir / "client.stdout"),
            ctx.relative(inv_dir / "client.stderr"),
        ]
        if tracer_out is not None:
            record_output(inv, tracer_out)
        elif later and tracer and outcome.wrapper and self.deferred:  # lab.run.deferred
            self.deferred.add(tracer, ctx, outcome.wrapper, p, inv)
        for name, why in self.plan.unavailable.items():
            inv.missing.setdefault(name, why)
        return inv
