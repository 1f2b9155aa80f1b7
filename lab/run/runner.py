"""The runner: executes scenarios pass by pass, invocation by invocation, and produces the
results model. It formats nothing; presenters draw what it returns.

    plan = Plan(scenarios=[...], passes=["none", "strace"], packets="best-effort", ...)
    with Runner(plan, run_dir, observers=doctor.observers, progress=print) as runner:
        result = runner.run()
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from lab.collectors import process_collector
from lab.collectors.base import CollectorOutput, InvocationContext, ProcessCollector
from lab.errors import ClientError, CollectorError, LabError
from lab.host import procs
from lab.host.clock import now_rfc3339
from lab.judge import calibration, contract
from lab.model import (
    ClientClaim,
    Invocation,
    ObserverStatus,
    Pass,
    ScenarioResult,
)
from lab.run import backup_check as verifier
from lab.run import fixture, receiver
from lab.run.scenario import Scenario

Progress = Callable[[str], None]


@dataclass
class Plan:
    scenarios: list[Scenario]
    #: "none" first, then the process collectors to run, each in its own pass
    passes: list[str]
    packets: str  # "off" | "best-effort" | "required"
    repetitions: int = 1
    size: int = fixture.DEFAULT_SIZE
    client: Path = Path("native/backup-client")
    #: "seeded": pass --behavior from the scenario; "candidate": client contract v1 only
    client_kind: str = "seeded"
    timeout_s: float = 120.0
    #: collectors that were asked for but cannot run, with the reason
    unavailable: dict[str, str] = field(default_factory=dict)
    seed: str = "lab"


def client_argv(
    plan: Plan, scenario: Scenario, source: Path, addresses: dict[str, str]
) -> list[str]:
    argv = [
        str(plan.client.resolve()),
        "--source",
        str(source),
        "--receiver",
        addresses["receiver"],
    ]
    if plan.client_kind == "seeded" and scenario.behavior != "candidate":
        argv += ["--behavior", scenario.behavior]
        for arg in scenario.client_args:
            for role, address in addresses.items():
                arg = arg.replace("{" + role + "}", address)
            argv.append(arg)
    return argv


def parse_claim(stdout: bytes, done: procs.Completed, exit_status: int | None) -> ClientClaim:
    """The client's own account: its JSON event lines and exit status (contract v1)."""
    events: list[dict[str, Any]] = []
    unparsed = 0
    for raw in stdout.decode("utf-8", "replace").splitlines():
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            unparsed += 1
            continue
        if isinstance(obj, dict):
            events.append(obj)
        else:
            unparsed += 1
    completion = events[-1] if events and events[-1].get("event") == "complete" else None
    said_ok = completion is not None and completion.get("status") == "ok"
    return ClientClaim(
        exit_status=exit_status,
        claimed_success=(exit_status == 0) or said_ok,
        completion=completion,
        events=events,
        unparsed_lines=unparsed,
        timed_out=done.timed_out,
        killed_by_signal=done.killed_by_signal,
        wall_s=done.duration_s,
        cpu_s=done.cpu_s,
    )


class Runner:
    def __init__(
        self,
        plan: Plan,
        run_dir: Path,
        *,
        observers: dict[str, ObserverStatus],
        progress: Progress | None = None,
    ) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.observers = observers
        self.progress = progress or (lambda _msg: None)
        self.log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
        self.timeline_path = run_dir / "timeline.jsonl"
        # Several runners may share a run directory (an evaluation's instrument check, then
        # the candidate): keep what an earlier one wrote.
        self._timeline: list[dict[str, Any]] = []
        if self.timeline_path.exists():
            text = self.timeline_path.read_text(encoding="utf-8")
            self._timeline = [json.loads(line) for line in text.splitlines() if line.strip()]

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Whatever happened (an error, Ctrl-C), no process the lab started outlives it.
        procs.stop_all()
        self.flush_timeline()

    # -- timeline --------------------------------------------------------------------------

    def event(self, source: str, clock: str, ts: str, **fields: Any) -> None:
        self._timeline.append({"ts": ts, "clock": clock, "source": source, **fields})

    def flush_timeline(self) -> None:
        rows = sorted(self._timeline, key=lambda r: (r["ts"], r["source"]))
        with open(self.timeline_path, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True) + "\n")

    # -- execution -------------------------------------------------------------------------

    def check_client(self) -> None:
        client = self.plan.client
        if not client.is_file():
            raise ClientError(
                f"{client}: the client binary does not exist; build it with 'make -C native'."
            )

    def run(self) -> list[ScenarioResult]:
        self.check_client()
        results: list[ScenarioResult] = []
        total = len(self.plan.scenarios) * self.plan.repetitions
        n = 0
        for scenario in self.plan.scenarios:
            for rep in range(1, self.plan.repetitions + 1):
                n += 1
                self.progress(f"[{n}/{total}] {scenario.name} (repetition {rep})")
                results.append(self.run_scenario(scenario, rep))
        return results

    def run_scenario(self, scenario: Scenario, rep: int) -> ScenarioResult:
        t0 = time.monotonic()
        base = self.run_dir / scenario.name / f"r{rep}"
        result = ScenarioResult(
            name=scenario.name,
            repetition=rep,
            description=scenario.description,
            scenario_file=f"scenarios/{scenario.path.name}",
            passes=[],
        )
        seed = f"{self.plan.seed}:{scenario.name}:r{rep}"
        for collector_name in self.plan.passes:
            self.progress(f"    pass {collector_name}")
            result.passes.append(self.run_pass(scenario, rep, collector_name, base, seed))
        result.verdicts = contract.judge(
            result, expected=scenario.expect.verdicts, faults_configured=bool(scenario.faults)
        )
        result.findings = calibration.evaluate(scenario, result, size=self.plan.size)
        # Only the untraced pass failing means the scenario did not execute; a tracer's
        # failure is recorded in its pass and in each invocation's "missing" reasons.
        result.error = next(
            (p.error for p in result.passes if p.error and p.collector == "none"), None
        )
        result.wall_s = time.monotonic() - t0
        base.mkdir(parents=True, exist_ok=True)
        (base / "result.json").write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        self.flush_timeline()
        return result

    def run_pass(
        self, scenario: Scenario, rep: int, collector_name: str, base: Path, seed: str
    ) -> Pass:
        # Evidence (records, client output, tracer output) goes under the run directory;
        # bulky state (the source file, the receiver's store) lives in a scratch directory
        # that is removed after the pass: the verifier has recorded its digests, and the
        # source can be regenerated from its seed (lab.fixture).
        evidence = base / collector_name
        evidence.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"lab-{scenario.name}-{collector_name}-"))
        t0 = time.monotonic()
        try:
            p = self._run_pass(scenario, rep, collector_name, seed, evidence, scratch)
            p.wall_s = time.monotonic() - t0
            return p
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _run_pass(
        self,
        scenario: Scenario,
        rep: int,
        collector_name: str,
        seed: str,
        evidence: Path,
        scratch: Path,
    ) -> Pass:
        source = scratch / "source.bin"
        source_digest = fixture.write_source(source, seed=seed, size=self.plan.size)
        tracer: ProcessCollector | None = None
        if collector_name != "none":
            tracer = process_collector(collector_name)()
        labels = {"scenario": scenario.name, "repetition": rep, "pass": collector_name}
        with (
            receiver.Receiver.serving(
                scratch / "store",
                evidence / "receiver.jsonl",
                faults=scenario.faults,
            ) as rx,
            receiver.Decoy.serving(evidence / "decoy.jsonl") as decoy,
        ):
            p = Pass(
                collector=collector_name,
                invocations=[],
                receiver_address=rx.address,
                decoy_address=decoy.address,
                source_seed=seed,
                source_sha256=source_digest,
                source_size=self.plan.size,
            )
            if scenario.preload == "older":
                p.preload_sha256 = rx.preload(fixture.older_backup(seed, self.plan.size))
            for index in range(1, scenario.invocations + 1):
                rx.invocation = decoy.invocation = index
                held = rx.saved_digest == source_digest
                try:
                    inv = self.run_invocation(
                        scenario, p, tracer, index, evidence, source, (rx, decoy), held, labels
                    )
                except LabError as exc:
                    if tracer is None:
                        raise
                    # A tracer that cannot even start (a client path it cannot take, a tool
                    # gone missing) fails its own pass, never the run.
                    p.error = f"{tracer.name} could not run invocation {index}: {exc}"
                    break
                p.invocations.append(inv)
            rx.invocation = decoy.invocation = 0
        for rec in rx.records + decoy.records:
            if rec["event"] in ("connect", "request", "answer", "decision", "payload", "preloaded"):
                fields = {k: v for k, v in rec.items() if k not in ("ts", "clock", "source")}
                clock = f"realtime ({rec['source']} thread)"
                self.event(rec["source"], clock, rec["ts"], **labels, **fields)
        return p

    def run_invocation(
        self,
        scenario: Scenario,
        p: Pass,
        tracer: ProcessCollector | None,
        index: int,
        state: Path,
        source: Path,
        endpoints: tuple[receiver.Receiver, receiver.Decoy],
        held: bool,
        labels: dict[str, Any],
    ) -> Invocation:
        rx, decoy = endpoints
        addresses = {"receiver": rx.address, "decoy": decoy.address}
        inv_dir = state / f"inv{index}"
        inv_dir.mkdir(parents=True, exist_ok=True)
        ctx = InvocationContext(
            run_dir=self.run_dir,
            out_dir=inv_dir,
            client_path=self.plan.client.resolve(),
            source_path=source.resolve(),
            source_size=self.plan.size,
            receiver_port=rx.port,
            decoy_port=decoy.port,
            invocation=index,
            log=self.log,
            timeout_s=self.plan.timeout_s,
        )
        argv = client_argv(self.plan, scenario, source.resolve(), addresses)
        wrapped = tracer.wrap(argv, ctx) if tracer is not None else argv
        capture, capture_missing = self.start_capture(ctx)
        self.event(
            "runner",
            "realtime (lab)",
            now_rfc3339(),
            **labels,
            invocation=index,
            event="client-start",
        )
        outputs: list[CollectorOutput] = []
        try:
            done = procs.run(
                wrapped,
                purpose=f"client invocation {index} ({labels['scenario']}, pass {p.collector})",
                log=self.log,
                stdout=inv_dir / "client.stdout",
                stderr=inv_dir / "client.stderr",
                timeout=self.plan.timeout_s,
                accept=None,
                cwd=inv_dir,
            )
        finally:
            # tcpdump is stopped whatever happened to the client (or its tracer)
            if capture is not None:
                outputs.append(capture.stop())
        exited_at = now_rfc3339()
        exit_status = done.exit_status
        if tracer is not None:
            out = tracer.collect(ctx, done)
            outputs.insert(0, out)
            if not tracer.passes_exit_status:
                exit_status = out.client_exit_status
            if out.error is not None:
                # A tracer that failed, crashed or hung taints its whole pass: the client
                # may have been killed with it. The pass is kept as evidence but not judged.
                p.error = p.error or f"{tracer.name} failed in invocation {index}: {out.error}"
        # The endpoints may still be finishing the last connection's records.
        for endpoint in (rx, decoy):
            if not endpoint.wait_idle():
                endpoint.record("still-busy", why="connection still open 5 s after client exit")
        claim = parse_claim((inv_dir / "client.stdout").read_bytes(), done, exit_status)
        for ev in claim.events:
            self.event(
                "client",
                "realtime at client exit (lab)",
                exited_at,
                **labels,
                invocation=index,
                claim=ev,
            )
        self.event(
            "client",
            "realtime at client exit (lab)",
            exited_at,
            **labels,
            invocation=index,
            event="exit",
            exit_status=exit_status,
        )
        check = verifier.verify(source=source, backup=rx.store_dir / receiver.BACKUP_NAME)
        self.event(
            "verifier",
            "realtime (lab)",
            check.checked_at,
            **labels,
            invocation=index,
            event="check",
            **check.to_dict(),
        )
        inv = Invocation(
            index=index,
            claim=claim,
            verifier=check,
            receiver=receiver.summarize(rx.records, invocation=index, held_at_start=held),
            decoy=receiver.summarize_decoy(decoy.records, invocation=index),
        )
        inv.artifacts["client"] = [
            ctx.relative(ctx.out_dir / "client.stdout"),
            ctx.relative(ctx.out_dir / "client.stderr"),
        ]
        for out in outputs:
            if out.artifacts:
                inv.artifacts[out.name] = list(out.artifacts)
            if out.summary is not None and out.error is None:
                inv.observed[out.name] = out.summary
            else:
                inv.missing[out.name] = out.error or f"{out.name} produced no summary"
        if capture_missing is not None:
            inv.missing["packets"] = capture_missing
        for name, why in self.plan.unavailable.items():
            inv.missing.setdefault(name, why)
        return inv

    def start_capture(self, ctx: InvocationContext) -> tuple[Any, str | None]:
        """Start tcpdump around one invocation; (capture, None) or (None, why not)."""
        if self.plan.packets == "off":
            return None, "packet capture off (--packets off)"
        status = self.observers.get("packets")
        if status is None or not status.available:
            why = status.reason if status is not None else "packets were not probed"
            return None, f"packet capture unavailable: {why}"
        from lab.collectors.packets import PacketCapture

        capture = PacketCapture(ctx, [ctx.receiver_port, ctx.decoy_port])
        try:
            capture.start()
        except Exception as exc:
            if self.plan.packets == "required":
                raise CollectorError(
                    f"packet capture could not start ({exc}); rerun with --packets best-effort "
                    "or fix the capture (python -m lab doctor)."
                ) from exc
            return None, f"packet capture failed to start: {exc}"
        return capture, None
