"""The stages every command shares — plan, execute, judge, report, seal — as functions that
``lab run``, ``lab evaluate``, ``lab campaign`` and ``lab merge`` call (through
``lab.pipeline``), never each other's internals.

    prepared = setup(collector, packets, archive=True, say=say)      # plan: observers, signer
    run_dir = open_run(prepared, out, new_run_id(), sandbox="required")
    results = run_plan(plan, run_dir, prepared, say)                 # execute, then judge
    result = make_result(run_id=..., prepared=prepared, scenario_results=results, ...)
    archive = finish(result, run_dir, signer=prepared.signer, started_epoch=t, say=say)
    # finish = report(result, run_dir, say) + seal(result, run_dir, signer, ...)
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lab import __version__, resources
from lab.errors import CollectorError, LabError, UsageError
from lab.host import identity
from lab.host.clock import now_rfc3339
from lab.judge import aggregate
from lab.model import ObserverStatus, RunResult, ScenarioResult
from lab.registry import CAPTURE, COLLECTOR_NAMES, PROCESS_COLLECTORS
from lab.run.plan import Plan
from lab.run.runner import Runner
from lab.run.timeline import read_time_base
from lab.run.tool_facts import observer_detail
from lab.sandbox import Sandbox, SandboxSettings
from lab.schemas import RESULTS_SCHEMA_FILE, schema_bytes, validate_results
from lab.workloads import workload

if TYPE_CHECKING:
    from lab.evidence.archive import ArchiveInfo
    from lab.evidence.signing import Signer
    from lab.reports import ArchivedFile

#: the directory holding the lab package (a checkout, or site-packages when installed)
REPO = resources.package_root()
COLLECTOR_CHOICES = ("none", *PROCESS_COLLECTORS, "all")
PACKET_CHOICES = ("off", "best-effort", "required")
SANDBOX_CHOICES = ("required", "off")


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


class ScenarioFile(Protocol):
    """A scenario as the run directory keeps it: its file's name and its text."""

    @property
    def path(self) -> Path: ...

    @property
    def text(self) -> str: ...


def copy_inputs(run_dir: Path, chosen: Sequence[ScenarioFile], probes_dir: Path) -> None:
    """The scenario files and probe scripts a run used, copied into its directory."""
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
    signer: Signer | None
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
        wanted.append(CAPTURE)
    doc = doctor_mod.check(mount=True, collectors=wanted)
    for name in COLLECTOR_NAMES:
        # what was not asked for was not probed: said so, never probed as absent
        doc.observers.setdefault(
            name, ObserverStatus(False, "not probed: not selected for this run")
        )
    for action in doc.actions:
        say(action)
    observers = doc.observers
    passes, skipped = plan_passes(collector, observers)
    if packets == "required" and not observers[CAPTURE].available:
        raise CollectorError(
            f"packet capture is required but unavailable: {observers[CAPTURE].reason}; "
            "rerun with --packets best-effort or fix it (python -m lab doctor)."
        )
    if packets == "off":
        skipped[CAPTURE] = "packet capture off (--packets off)"
    elif not observers[CAPTURE].available:
        skipped[CAPTURE] = f"unavailable: {observers[CAPTURE].reason}"
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
    run_dir: Path | None = None,
) -> RunResult:
    """``run_dir``: where the run's evidence is (its ``timeline.jsonl`` names the time base
    ``environment.time_base`` repeats; the tools' stderr files hold their warnings)."""
    statuses = {
        name: ObserverStatus(
            available=status.available,
            reason=status.reason,
            detail={
                **observer_detail(name, status.detail, scenario_results, run_dir),
                "used": name in prepared.passes
                or (name == CAPTURE and packets != "off" and status.available),
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
    if run_dir is not None:
        result.environment["time_base"] = read_time_base(run_dir / "timeline.jsonl")
    result.aggregate = aggregate.aggregate(scenario_results)
    if prepared.signer is not None:
        result.signing = prepared.signer.describe()
    return result


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
        judge_scenario(result, by_name[result.name], size=plan.size, workload_name=plan.workload)
        base = run_dir / result.name / f"r{result.repetition}"
        base.mkdir(parents=True, exist_ok=True)
        (base / "result.json").write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    return results


def judge_scenario(
    result: ScenarioResult, chosen: Any, *, size: int, workload_name: str = "backup"
) -> None:
    """Judge: the workload's verdicts and calibration findings for one scenario's passes."""
    workload(workload_name).judge(result, chosen, size=size)


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
    signer: Signer | None,
    started_epoch: float,
    say: Callable[[str], None],
    dependencies: list[dict[str, Any]] | None = None,
) -> ArchiveInfo | None:
    """Report, then seal: results.json and the reports, and (with a signer) the signed
    archive; ``dependencies`` are further inputs the provenance names (a merge's shards)."""
    report(result, run_dir, say=say)
    if signer is None:
        return None
    return seal(
        result,
        run_dir,
        signer=signer,
        started_epoch=started_epoch,
        say=say,
        dependencies=dependencies,
    )


def report(result: RunResult, run_dir: Path, *, say: Callable[[str], None]) -> None:
    """Report: ``results.json`` (validated), ``report.md`` and ``report.pdf``."""
    write_results(result, run_dir)
    from lab.reports.markdown import render_markdown
    from lab.reports.pdf import render_pdf

    files = archived_files(run_dir)
    (run_dir / "report.md").write_text(render_markdown(result, files=files), encoding="utf-8")
    from lab.reports.html import render_html
    from lab.reports.swimlanes import timeline_rows

    rows = timeline_rows(run_dir / "timeline.jsonl")
    say("Drawing the PDF report…")
    render_pdf(result, run_dir / "report.pdf", files=files, timeline=rows)
    html = render_html(result, files=files, timeline=rows)
    (run_dir / "report.html").write_text(html, encoding="utf-8")


def seal(
    result: RunResult,
    run_dir: Path,
    *,
    signer: Signer,
    started_epoch: float,
    say: Callable[[str], None],
    dependencies: list[dict[str, Any]] | None = None,
    scenarios: list[str] | None = None,
    observers: bool = True,
) -> ArchiveInfo:
    """Seal: ``SHA256SUMS``, its signatures, the provenance and the archive. ``scenarios``:
    the provenance's scenario list (default: the run's options); ``observers``: whether the
    provenance's internal record holds the observers' states (a fixture task has none)."""
    from lab.evidence.archive import write_archive
    from lab.evidence.provenance import LOCAL_BUILDER_ID, ProvenanceInputs

    env = result.environment
    image = env.get("image") or {}
    content_digest, image_id = identity.image_digests(image)
    inputs = ProvenanceInputs(
        run_id=result.run_id,
        started_on=result.started_at,
        finished_on=result.finished_at,
        scenarios=list(result.options.get("scenarios", [])) if scenarios is None else scenarios,
        options=result.options,
        image_name=image.get("name"),
        image_digest=content_digest,
        image_id=image_id,
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
            **(
                {"observers": {k: v.to_dict() for k, v in result.observers.items()}}
                if observers
                else {}
            ),
            "image": image or None,
            "in_container": env.get("in_container"),
        },
        dependencies=list(dependencies or []),
    )
    say("Signing and packing the evidence archive…")
    return write_archive(run_dir, signer=signer, provenance_inputs=inputs, epoch=int(started_epoch))


def archived_files(run_dir: Path) -> list[ArchivedFile]:
    """Every file of the run directory with its size and SHA-256, for the reports' table."""
    from lab.host.digest import sha256_file
    from lab.reports import REPORT_FILES, ArchivedFile

    rows = []
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(run_dir).as_posix()
        if rel in REPORT_FILES:
            continue
        rows.append(ArchivedFile(path=rel, size=path.stat().st_size, sha256=sha256_file(path)))
    return rows
