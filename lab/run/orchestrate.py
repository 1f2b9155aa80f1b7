"""``lab run`` from start to finish: choose passes, run, judge, write, sign, archive.

The CLI and the Invoke tasks both call :func:`execute`; neither holds logic of its own.

    outcome = execute(RunRequest(names=["baseline"], collector="none", packets="off"), say=print)
    outcome.result.calibrated, outcome.archive.path
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import __version__
from lab.errors import CollectorError, LabError, UsageError
from lab.host import identity
from lab.host.clock import epoch_to_rfc3339, now_rfc3339
from lab.host.digest import sha256_file
from lab.judge import aggregate
from lab.model import PROCESS_COLLECTORS, ObserverStatus, RunResult, ScenarioResult
from lab.run import schedule, shard
from lab.run.interrupt import mark_interrupted, signal_name
from lab.run.options import check_count, check_run_options
from lab.run.plan import Plan
from lab.run.runner import Runner
from lab.sandbox import Sandbox, SandboxSettings
from lab.schemas import RESULTS_SCHEMA_FILE, schema_bytes, validate_results
from lab.workloads.backup import calibration, contract, scenario
from lab.workloads.backup.fixture import DEFAULT_SIZE

REPO = Path(__file__).resolve().parents[2]
COLLECTOR_CHOICES = ("none", *PROCESS_COLLECTORS, "all")
PACKET_CHOICES = ("off", "best-effort", "required")
SANDBOX_CHOICES = ("required", "off")


@dataclass
class RunRequest:
    names: list[str] = field(default_factory=list)
    everything: bool = False
    collector: str = "none"
    packets: str = "off"
    repetitions: int = 1
    size: int = DEFAULT_SIZE
    out: Path = Path("artifacts")
    client: Path | None = None
    scenarios_dir: Path | None = None
    timeout_s: float = 120.0
    archive: bool = True
    #: "seeded" (the lab's own client, --behavior per scenario) or "candidate"
    client_kind: str = "seeded"
    run_id: str | None = None
    #: "required": every invocation in the sandbox (refuse to run without it); "off": the
    #: client runs as the lab's user, uncontained, and no clause it could forge can pass
    sandbox: str = "required"
    #: run only this shard's units (``--shard I/N``); ``run_id`` is then the frozen id that
    #: every shard shares (derived from the inputs when None)
    shard: shard.ShardSpec | None = None
    #: ``--jobs N``: untraced passes run at once (None: the number of cores; lab.run.schedule)
    jobs: int | None = None


@dataclass
class RunOutcome:
    result: RunResult
    run_dir: Path
    archive: Any | None  # lab.evidence.archive.ArchiveInfo


def new_run_id(prefix: str = "run") -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}-{stamp}-{secrets.token_hex(3)}"


def plan_passes(
    collector: str, observers: dict[str, ObserverStatus]
) -> tuple[list[str], dict[str, str]]:
    """The passes to run and, for every collector that will not run, why."""
    if collector not in COLLECTOR_CHOICES:
        known = ", ".join(COLLECTOR_CHOICES)
        raise UsageError(f"--collector {collector!r} is unknown; one of {known}.")
    wanted = list(PROCESS_COLLECTORS) if collector == "all" else [collector]
    passes = ["none"]
    skipped: dict[str, str] = {}
    for name in PROCESS_COLLECTORS:
        status = observers.get(name)
        if name not in wanted:
            skipped[name] = f"not selected (--collector {collector})"
        elif status is None or not status.available:
            skipped[name] = f"unavailable: {status.reason if status else 'not probed'}"
        else:
            passes.append(name)
    return passes, skipped


def _copy_inputs(run_dir: Path, chosen: list[scenario.Scenario], probes_dir: Path) -> None:
    (run_dir / "scenarios").mkdir(parents=True, exist_ok=True)
    for s in chosen:
        (run_dir / "scenarios" / s.path.name).write_text(s.text, encoding="utf-8")
    if probes_dir.is_dir():
        (run_dir / "probes").mkdir(exist_ok=True)
        for probe in sorted(probes_dir.glob("*.bt")):
            shutil.copyfile(probe, run_dir / "probes" / probe.name)


def write_results(run: RunResult, run_dir: Path) -> None:
    """``results.json``, validated, naming in ``$schema`` the schema shipped beside it (so
    the archive's checksums and signature cover the schema it claims to match)."""
    document = {"$schema": RESULTS_SCHEMA_FILE, **run.to_dict()}
    validate_results(document)
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    (run_dir / RESULTS_SCHEMA_FILE).write_bytes(schema_bytes(RESULTS_SCHEMA_FILE))
    (run_dir / "results.json").write_text(text, encoding="utf-8")


@dataclass
class Setup:
    """What every run needs before its first pass: observers, passes, the signer."""

    observers: dict[str, ObserverStatus]
    passes: list[str]
    skipped: dict[str, str]
    facts: dict[str, Any]
    actions: list[str]
    signer: Any | None  # lab.evidence.signing.Signer
    #: the run's sandbox; None with --sandbox off
    sandbox: Sandbox | None = None
    #: what results.json records of it
    sandbox_record: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()


def open_sandbox(
    mode: str, run_id: str, *, settings: SandboxSettings, masked: list[Path], log_path: Path
) -> tuple[Sandbox | None, dict[str, Any]]:
    """The run's sandbox, or None with ``--sandbox off`` (said loudly, recorded)."""
    if mode not in SANDBOX_CHOICES:
        raise UsageError(f"--sandbox {mode!r} is unknown; one of {', '.join(SANDBOX_CHOICES)}.")
    if mode == "off":
        return None, {
            "enabled": False,
            "why": "--sandbox off: the client ran as the lab's user, outside any sandbox",
        }
    from lab.host.procs import CommandLog

    sandbox = Sandbox.open(
        run_id, settings=settings, masked=masked, log=CommandLog(log_path, root=log_path.parent)
    )
    return sandbox, sandbox.describe()


def open_run(prepared: Setup, out: Path, run_id: str, *, sandbox: str = "required") -> Path:
    """The run's directory, private (0700: its evidence is for the lab and the reviewer,
    never for the client), with the run's sandbox opened into ``prepared``; when the sandbox
    cannot open, the directory is removed and the error raised."""
    run_dir = (out / run_id).resolve()
    run_dir.mkdir(parents=True, exist_ok=False)
    run_dir.chmod(0o700)
    try:
        prepared.sandbox, prepared.sandbox_record = open_sandbox(
            sandbox,
            run_id,
            settings=SandboxSettings(),
            masked=signing_key_paths(),
            log_path=run_dir / "commands.jsonl",
        )
    except LabError:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return run_dir


def setup(collector: str, packets: str, *, archive: bool, say: Callable[[str], None]) -> Setup:
    from lab.host import doctor as doctor_mod

    if packets not in PACKET_CHOICES:
        raise UsageError(f"--packets {packets!r} is unknown; one of {', '.join(PACKET_CHOICES)}.")
    wanted = list(PROCESS_COLLECTORS) if collector == "all" else [collector]
    wanted = [c for c in wanted if c != "none"]
    if packets != "off":
        wanted.append("packets")
    doc = doctor_mod.check(mount=True, collectors=wanted)
    for name in ("strace", "bpftrace", "perf", "packets"):
        # what was not asked for was not probed: said so, never probed as absent
        doc.observers.setdefault(
            name, ObserverStatus(False, "not probed: not selected for this run")
        )
    for action in doc.actions:
        say(action)
    observers = doc.observers
    passes, skipped = plan_passes(collector, observers)
    if packets == "required" and not observers["packets"].available:
        raise CollectorError(
            f"packet capture is required but unavailable: {observers['packets'].reason}; "
            "rerun with --packets best-effort or fix it (python -m lab doctor)."
        )
    if packets == "off":
        skipped["packets"] = "packet capture off (--packets off)"
    elif not observers["packets"].available:
        skipped["packets"] = f"unavailable: {observers['packets'].reason}"
    signer = None
    if archive:
        from lab.evidence.signing import Signer

        signer = Signer.from_env()
        if signer.is_ephemeral:
            say(
                "No signing key configured (LAB_SIGNING_KEY): this run is signed with an "
                "ephemeral key, so the archive proves integrity but not authenticity."
            )
    return Setup(observers, passes, skipped, dict(doc.facts), list(doc.actions), signer)


def make_result(
    *,
    run_id: str,
    started: str,
    options: dict[str, Any],
    prepared: Setup,
    packets: str,
    scenario_results: list[Any],
    client: Path,
) -> RunResult:
    statuses = {
        name: ObserverStatus(
            available=status.available,
            reason=status.reason,
            detail={
                **status.detail,
                "used": name in prepared.passes
                or (name == "packets" and packets != "off" and status.available),
            },
        )
        for name, status in prepared.observers.items()
    }
    result = RunResult(
        run_id=run_id,
        started_at=started,
        finished_at=now_rfc3339(),
        options={**options, "passes": prepared.passes, "lab_version": __version__},
        observers=statuses,
        environment=identity.environment(REPO, client, prepared.facts),
        scenarios=scenario_results,
    )
    result.environment["doctor_actions"] = list(prepared.actions)
    result.environment["sandbox"] = dict(prepared.sandbox_record)
    result.aggregate = aggregate.aggregate(scenario_results)
    if prepared.signer is not None:
        result.signing = prepared.signer.describe()
    return result


def execute(request: RunRequest, *, say: Callable[[str], None]) -> RunOutcome:
    client = request.client or REPO / "native" / "backup-client"
    check_run_options(
        repetitions=request.repetitions,
        size=request.size,
        timeout_s=request.timeout_s,
        out=request.out,
        client=client,
    )
    jobs = schedule.default_jobs() if request.jobs is None else request.jobs
    check_count(jobs, "--jobs", schedule.MAX_JOBS)
    scenarios_dir = request.scenarios_dir or REPO / "scenarios"
    chosen = scenario.select(scenarios_dir, request.names, request.everything)
    prepared = setup(request.collector, request.packets, archive=request.archive, say=say)

    units: list[tuple[str, int]] | None = None
    shard_record: dict[str, Any] | None = None
    if request.shard is not None:
        run_id, units, shard_record = plan_shard(request, chosen, client)
    else:
        run_id = shard.check_run_id(request.run_id) if request.run_id else new_run_id()
    run_dir = open_run(prepared, request.out, run_id, sandbox=request.sandbox)
    if prepared.sandbox is None:
        say(
            "WARNING: --sandbox off: the client runs as this user, outside any sandbox; the "
            "clauses it could forge (C1, C3, C5, C6) cannot pass in this run."
        )
    _copy_inputs(run_dir, chosen, REPO / "probes")
    started_epoch = time.time()
    concurrency = schedule.decide(
        jobs,
        sandboxed=prepared.sandbox is not None,
        client_kind=request.client_kind,
        captured=request.packets != "off" and prepared.observers["packets"].available,
    )
    plan = Plan(
        scenarios=chosen,
        passes=prepared.passes,
        packets=request.packets,
        repetitions=request.repetitions,
        size=request.size,
        client=client,
        client_kind=request.client_kind,
        timeout_s=request.timeout_s,
        unavailable=prepared.skipped,
        units=units,
        jobs=concurrency.jobs,
    )
    say(
        f"Run {run_id}: {len(chosen)} scenario(s) × {request.repetitions} repetition(s)"
        + (f", shard {request.shard}: {len(units or [])} of them" if request.shard else "")
        + f"; passes: {', '.join(prepared.passes)}; packets: {request.packets}; "
        + concurrency.sentence()
    )
    result: RunResult | None = None
    stage = "during the passes"
    try:
        scenario_results = run_plan(plan, run_dir, prepared, say)
        stage = "while the results were judged and written"
        result = _make_run_result(
            request, chosen, run_id, started_epoch, prepared, scenario_results, client
        )
        result.shard = shard_record
        overlapped = sum(p.concurrent for s in scenario_results for p in s.passes)
        result.concurrency = concurrency.to_dict(overlapped)
        prepared.close()
        stage = "while the reports were written or the archive signed"
        archive = finish(
            result, run_dir, signer=prepared.signer, started_epoch=started_epoch, say=say
        )
    except KeyboardInterrupt as exc:
        with contextlib.suppress(Exception):
            prepared.close()
        reason = f"{signal_name(exc)} {stage}"
        if result is None:
            with contextlib.suppress(Exception):  # the passes' records, however few
                result = _make_run_result(
                    request, chosen, run_id, started_epoch, prepared, [], client
                )
                result.shard = shard_record
        raise mark_interrupted(
            run_dir,
            result,
            reason=reason,
            say=say,
            write_results=write_results,
            render_markdown=_markdown_without_files,
        ) from None
    return RunOutcome(result=result, run_dir=run_dir, archive=archive)


def _markdown_without_files(result: RunResult) -> str:
    from lab.reports.markdown import render_markdown

    return render_markdown(result, files=None)


def _make_run_result(
    request: RunRequest,
    chosen: list[scenario.Scenario],
    run_id: str,
    started_epoch: float,
    prepared: Setup,
    scenario_results: list[ScenarioResult],
    client: Path,
) -> RunResult:
    return make_result(
        run_id=run_id,
        started=epoch_to_rfc3339(started_epoch),
        options={
            "scenarios": [s.name for s in chosen],
            "collector": request.collector,
            "packets": request.packets,
            "repetitions": request.repetitions,
            "size": request.size,
            "client_kind": request.client_kind,
            "timeout_s": request.timeout_s,
        },
        prepared=prepared,
        packets=request.packets,
        scenario_results=scenario_results,
        client=client,
    )


def plan_shard(
    request: RunRequest, chosen: list[scenario.Scenario], client: Path
) -> tuple[str, list[tuple[str, int]], dict[str, Any]]:
    """This shard's run id, its units in run order, and its ``shard`` record. The frozen id
    is ``--run-id`` or a digest of everything that decides what the shards compute."""
    spec = request.shard
    assert spec is not None
    if request.run_id:
        frozen = shard.check_run_id(request.run_id)
    else:
        frozen = shard.frozen_run_id(
            {
                "lab_version": __version__,
                "scenarios": {s.name: scenario_digest(s) for s in chosen},
                "collector": request.collector,
                "packets": request.packets,
                "repetitions": request.repetitions,
                "size": request.size,
                "timeout_s": request.timeout_s,
                "client_kind": request.client_kind,
                "client_sha256": sha256_file(client) if client.is_file() else None,
                "sandbox": request.sandbox,
                "shards": spec.count,
            }
        )
    mine = spec.select(shard.work_units([s.name for s in chosen], request.repetitions))
    order = {s.name: i for i, s in enumerate(chosen)}
    units = sorted(((u.name, u.repetition) for u in mine), key=lambda u: (order[u[0]], u[1]))
    return (
        shard.shard_run_id(frozen, spec),
        units,
        shard.shard_record(spec, mine, frozen, "scenario"),
    )


def scenario_digest(s: scenario.Scenario) -> str:
    return hashlib.sha256(s.text.encode("utf-8")).hexdigest()


def run_plan(
    plan: Plan, run_dir: Path, prepared: Setup, say: Callable[[str], None]
) -> list[ScenarioResult]:
    """Run the plan, then judge what it produced (the runner only produces)."""
    # an interrupt propagates to execute(), the one place that marks the run incomplete
    with Runner(
        plan, run_dir, observers=prepared.observers, sandbox=prepared.sandbox, progress=say
    ) as runner:
        results = runner.run()
    by_name = {s.name: s for s in plan.scenarios}
    for result in results:
        judge_scenario(result, by_name[result.name], size=plan.size)
        base = run_dir / result.name / f"r{result.repetition}"
        base.mkdir(parents=True, exist_ok=True)
        (base / "result.json").write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    return results


def judge_scenario(result: ScenarioResult, chosen: scenario.Scenario, *, size: int) -> None:
    result.verdicts = contract.judge(
        result, expected=chosen.expect.verdicts, faults_configured=bool(chosen.faults)
    )
    result.findings = calibration.evaluate(chosen, result, size=size)


def signing_key_paths() -> list[Path]:
    """Files that hold a signing key, hidden inside the sandbox even if they fall within a
    directory the sandbox shows (``LAB_SIGNING_KEY`` naming a file)."""
    value = os.environ.get("LAB_SIGNING_KEY", "")
    if value and "\n" not in value and len(value) < 4096:
        path = Path(value)
        with contextlib.suppress(OSError):
            if path.is_file():
                return [path.resolve()]
    return []


def finish(
    result: RunResult,
    run_dir: Path,
    *,
    signer: Any,
    started_epoch: float,
    say: Callable[[str], None],
    dependencies: list[dict[str, Any]] | None = None,
) -> Any:
    """Write results.json, the reports, and (with a signer) the signed archive;
    ``dependencies`` are further inputs the provenance names (a merge's shard archives)."""
    write_results(result, run_dir)
    from lab.reports.markdown import render_markdown
    from lab.reports.pdf import render_pdf

    files = archived_files(run_dir)
    (run_dir / "report.md").write_text(render_markdown(result, files=files), encoding="utf-8")
    say("Drawing the PDF report…")
    render_pdf(result, run_dir / "report.pdf", files=files)
    if signer is None:
        return None
    from lab.evidence.archive import write_archive
    from lab.evidence.provenance import LOCAL_BUILDER_ID, ProvenanceInputs

    env = result.environment
    image = env.get("image") or {}
    inputs = ProvenanceInputs(
        run_id=result.run_id,
        started_on=result.started_at,
        finished_on=result.finished_at,
        scenarios=list(result.options.get("scenarios", [])),
        options=result.options,
        image_name=image.get("name"),
        image_digest=image.get("digest"),
        git_repository=identity.git_repository(),
        builder_id=identity.builder_id() or LOCAL_BUILDER_ID,
        git_commit=env.get("git_commit"),
        git_dirty=env.get("git_dirty"),
        client_path=env.get("client"),
        client_digest=env.get("client_sha256"),
        kernel=env.get("kernel"),
        tool_versions=env.get("tool_versions", {}),
        lab_version=__version__,
        internal={
            "observers": {k: v.to_dict() for k, v in result.observers.items()},
            "image": image or None,
            "in_container": env.get("in_container"),
        },
        dependencies=list(dependencies or []),
    )
    say("Signing and packing the evidence archive…")
    return write_archive(run_dir, signer=signer, provenance_inputs=inputs, epoch=int(started_epoch))


def archived_files(run_dir: Path) -> list[Any]:
    """Every file of the run directory with its size and SHA-256, for the reports' table."""
    from lab.host.digest import sha256_file
    from lab.reports import ArchivedFile

    rows = []
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(run_dir).as_posix()
        if rel in ("report.md", "report.pdf"):
            continue
        rows.append(ArchivedFile(path=rel, size=path.stat().st_size, sha256=sha256_file(path)))
    return rows
