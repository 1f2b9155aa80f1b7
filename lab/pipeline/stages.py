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
import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lab import __version__, resources
from lab.errors import ArchiveError, SchemaError
from lab.host import identity
from lab.host.clock import now_rfc3339
from lab.judge import aggregate
from lab.model import ObserverStatus, RunResult, ScenarioResult

# the plan stage, in a module of its own (re-exported: the pipeline's one interface)
from lab.pipeline.prepare import (
    Setup,
)
from lab.registry import CAPTURE
from lab.run.plan import Plan
from lab.run.runner import Runner
from lab.run.timeline import read_time_base
from lab.run.tool_facts import observer_detail
from lab.schemas import RESULTS_SCHEMA_FILE, schema_bytes, validate_results
from lab.workloads import workload

if TYPE_CHECKING:
    from lab.evidence.archive import ArchiveInfo
    from lab.evidence.packing import Packer
    from lab.evidence.signing import Signer
    from lab.pipeline.drawing import Drawer
    from lab.reports import ArchivedFile

#: the directory holding the lab package (a checkout, or site-packages when installed)
REPO = resources.package_root()


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
    document, files = results_files(run)
    validate_results(document)
    for name, data in files.items():
        (run_dir / name).write_bytes(data)


def results_files(run: RunResult) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``results.json``'s document, and the bytes of the two files it makes (results.json
    and the schema it names), neither validated nor written yet."""
    document = {"$schema": RESULTS_SCHEMA_FILE, **run.to_dict()}
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    return document, {
        RESULTS_SCHEMA_FILE: schema_bytes(RESULTS_SCHEMA_FILE),
        "results.json": text.encode("utf-8"),
    }


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
    """Run the plan, judging each scenario repetition (the runner only produces) as soon as
    its last pass is done, while the others still run."""
    by_name = {s.name: s for s in plan.scenarios}

    def judged(result: ScenarioResult) -> None:
        judge_scenario(result, by_name[result.name], size=plan.size, workload_name=plan.workload)
        base = run_dir / result.name / f"r{result.repetition}"
        base.mkdir(parents=True, exist_ok=True)
        (base / "result.json").write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True))

    # an interrupt propagates to execute(), the one place that marks the run incomplete
    with Runner(
        plan,
        run_dir,
        observers=prepared.observers,
        sandbox=prepared.sandbox,
        progress=say,
        on_result=judged,
        on_start=prepared.later.begin,
    ) as runner:
        return runner.run()


def judge_scenario(
    result: ScenarioResult, chosen: Any, *, size: int, workload_name: str = "backup"
) -> None:
    """Judge: the workload's verdicts and calibration findings for one scenario's passes."""
    workload(workload_name).judge(result, chosen, size=size)


def finish(
    result: RunResult,
    run_dir: Path,
    *,
    signer: Signer | None,
    started_epoch: float,
    say: Callable[[str], None],
    dependencies: list[dict[str, Any]] | None = None,
    drawer: Drawer | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> ArchiveInfo | None:
    """Report, then seal: results.json and the reports, and (with a signer) the signed
    archive; ``dependencies`` are further inputs the provenance names (a merge's shards);
    ``drawer``: the run's PDF drawer (``lab.pipeline.drawing``), or None to draw here;
    ``meanwhile``: what the caller does while the drawer draws (print the verdict)."""
    packer = None
    if signer is not None:
        from lab.evidence.archive import packer_for

        packer = packer_for(run_dir, int(started_epoch))

    def beside() -> None:  # while the PDF is drawn: the verdict, and most of the archive
        if meanwhile is not None:
            meanwhile()
        if packer is not None:
            prepare_archive(packer)

    report(result, run_dir, say=say, drawer=drawer, meanwhile=beside)
    if signer is None:
        return None
    return seal(
        result,
        run_dir,
        signer=signer,
        started_epoch=started_epoch,
        say=say,
        dependencies=dependencies,
        packer=packer,
    )


def prepare_archive(packer: Packer) -> None:
    """Compress what the archive will hold of the run directory as it is now (everything
    but the PDF and what ``write_archive`` generates). Nothing is refused or written here:
    ``write_archive`` checks every file (names, links, private keys) as it always does, and
    a file that changes after this is compressed again (``lab.evidence.packing``)."""
    from lab.evidence.archive import collect_files

    with contextlib.suppress(ArchiveError, OSError):
        packer.prepare(collect_files(packer.run_dir))


def report(
    result: RunResult,
    run_dir: Path,
    *,
    say: Callable[[str], None],
    drawer: Drawer | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> None:
    """Report: ``results.json`` (validated), ``report.md``, ``report.pdf`` and ``report.html``.
    With a ``drawer`` the PDF is drawn in its process while this one writes the others."""
    from lab.pipeline.drawing import Job
    from lab.reports.drawer import draw_here
    from lab.reports.html import render_html
    from lab.reports.markdown import render_markdown
    from lab.reports.swimlanes import timeline_rows

    # the PDF is handed to the drawer before results.json is validated (the validator's
    # import and walk, ~70 ms, then run beside the drawing); results.json is written only
    # once valid, and an invalid one leaves no PDF either
    document, written = results_files(result)
    files = archived_files(run_dir, pending=written)
    timeline = run_dir / "timeline.jsonl"
    say("Drawing the PDF report…")
    pdf = run_dir / "report.pdf"
    job: Job | None = None
    if drawer is not None:
        job = drawer.draw(result, pdf, files=files, timeline=timeline)
    try:
        validate_results(document)
    except SchemaError:
        if job is not None:
            job.discard()  # the drawer is done with it before its PDF is removed
            pdf.unlink(missing_ok=True)
        raise
    for name, data in written.items():
        (run_dir / name).write_bytes(data)
    (run_dir / "report.md").write_text(render_markdown(result, files=files), encoding="utf-8")
    rows = timeline_rows(timeline)
    html = render_html(result, files=files, timeline=rows)
    (run_dir / "report.html").write_text(html, encoding="utf-8")
    if meanwhile is not None:
        meanwhile()
    if job is not None:
        job.wait()
    else:
        draw_here(result, pdf, files=files, timeline=timeline)


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
    packer: Packer | None = None,
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
    return write_archive(
        run_dir,
        signer=signer,
        provenance_inputs=inputs,
        epoch=int(started_epoch),
        packer=packer,
    )


def archived_files(run_dir: Path, pending: dict[str, bytes] | None = None) -> list[ArchivedFile]:
    """Every file of the run directory with its size and SHA-256, for the reports' table;
    ``pending``: files about to be written there (run-relative name -> their bytes), listed
    as they will be."""
    from lab.host.digest import sha256_file
    from lab.reports import REPORT_FILES, ArchivedFile

    waiting = dict(pending or {})
    on_disk = {p for p in run_dir.rglob("*") if p.is_file()}
    rows = []
    for path in sorted(on_disk | {run_dir / name for name in waiting}):
        rel = path.relative_to(run_dir).as_posix()
        if rel in REPORT_FILES:
            continue
        if rel in waiting:
            data = waiting[rel]
            rows.append(
                ArchivedFile(path=rel, size=len(data), sha256=hashlib.sha256(data).hexdigest())
            )
            continue
        rows.append(ArchivedFile(path=rel, size=path.stat().st_size, sha256=sha256_file(path)))
    return rows
