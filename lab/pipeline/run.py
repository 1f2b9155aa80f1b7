"""``lab run`` from start to finish: choose passes, run, judge, write, sign, archive — the
backup workload's scenarios through the shared stages of ``lab.pipeline``.

The CLI and the Invoke tasks both call :func:`execute`; neither holds logic of its own.

    outcome = execute(RunRequest(names=["baseline"], collector="none", packets="off"), say=print)
    outcome.result.calibrated, outcome.archive.path
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lab import __version__, resources
from lab.host.clock import epoch_to_rfc3339
from lab.host.digest import sha256_file
from lab.model import RunResult, ScenarioResult
from lab.model.records import ShardRecord
from lab.pipeline.drawing import Drawer, drawer, warm_imports
from lab.pipeline.prepare import Setup, new_run_id, open_run, setup
from lab.pipeline.stages import (
    REPO,
    copy_inputs,
    finish,
    make_result,
    run_plan,
    write_results,
)
from lab.run import schedule, shard
from lab.run.interrupt import mark_interrupted, signal_name
from lab.run.options import check_count, check_run_options
from lab.run.plan import Plan
from lab.workloads import workload
from lab.workloads.backup.scenario import Scenario

if TYPE_CHECKING:
    from lab.evidence.archive import ArchiveInfo

#: the workload ``lab run`` runs
BACKUP = workload("backup")


@dataclass
class RunRequest:
    names: list[str] = field(default_factory=list)
    everything: bool = False
    collector: str = "none"
    packets: str = "off"
    repetitions: int = 1
    size: int = BACKUP.default_size
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
    archive: ArchiveInfo | None


def execute(
    request: RunRequest,
    *,
    say: Callable[[str], None],
    judged: Callable[[RunResult], None] | None = None,
) -> RunOutcome:
    """``judged``: called with the judged results while the PDF is drawn (the CLI prints
    the verdict there, before the archive exists)."""
    # the PDF's drawer is forked first, before any thread of the run exists
    with drawer() as pdf:
        return _execute(request, say=say, drawer=pdf, judged=judged)


def _execute(
    request: RunRequest,
    *,
    say: Callable[[str], None],
    drawer: Drawer | None,
    judged: Callable[[RunResult], None] | None,
) -> RunOutcome:
    client = request.client or resources.native_client()
    check_run_options(
        repetitions=request.repetitions,
        size=request.size,
        timeout_s=request.timeout_s,
        out=request.out,
        client=client,
    )
    jobs = schedule.default_jobs() if request.jobs is None else request.jobs
    check_count(jobs, "--jobs", schedule.MAX_JOBS)
    scenarios_dir = request.scenarios_dir or BACKUP.scenarios_dir(REPO)
    chosen: list[Scenario] = BACKUP.select(scenarios_dir, request.names, request.everything)
    prepared = setup(request.collector, request.packets, archive=request.archive, say=say)

    units: list[tuple[str, int]] | None = None
    shard_record: ShardRecord | None = None
    if request.shard is not None:
        run_id, units, shard_record = plan_shard(request, chosen, client)
    else:
        run_id = shard.check_run_id(request.run_id) if request.run_id else new_run_id()
    run_dir = open_run(prepared, request.out, run_id, sandbox=request.sandbox, jobs=jobs)
    if prepared.sandbox is None:
        say(
            "WARNING: --sandbox off: the client runs as this user, outside any sandbox; the "
            "clauses it could forge (C1, C3, C5, C6) cannot pass in this run."
        )
    copy_inputs(run_dir, chosen, resources.probes_dir())
    started_epoch = time.time()
    concurrency = prepared.concurrency
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
        prepared.later.add(warm_imports)
        scenario_results = run_plan(plan, run_dir, prepared, say)
        stage = "while the results were judged and written"
        result = _make_run_result(
            request, chosen, run_id, started_epoch, prepared, scenario_results, client, run_dir
        )
        result.shard = shard_record
        overlapped = sum(p.concurrent for s in scenario_results for p in s.passes)
        result.concurrency = concurrency.to_dict(overlapped)
        prepared.close()
        stage = "while the reports were written or the archive signed"
        judged_now = result
        archive = finish(
            result,
            run_dir,
            signer=prepared.signer,
            started_epoch=started_epoch,
            say=say,
            drawer=drawer,
            meanwhile=None if judged is None else (lambda: judged(judged_now)),
        )
    except KeyboardInterrupt as exc:
        with contextlib.suppress(Exception):
            prepared.close()
        reason = f"{signal_name(exc)} {stage}"
        if result is None:
            with contextlib.suppress(Exception):  # the passes' records, however few
                result = _make_run_result(
                    request, chosen, run_id, started_epoch, prepared, [], client, run_dir
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
    chosen: list[Scenario],
    run_id: str,
    started_epoch: float,
    prepared: Setup,
    scenario_results: list[ScenarioResult],
    client: Path,
    run_dir: Path,
) -> RunResult:
    return make_result(
        run_id=run_id,
        # the finish is now_rfc3339() (microseconds): the start at the same precision
        started=epoch_to_rfc3339(started_epoch, "microseconds"),
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
        run_dir=run_dir,
    )


def plan_shard(
    request: RunRequest, chosen: list[Scenario], client: Path
) -> tuple[str, list[tuple[str, int]], ShardRecord]:
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


def scenario_digest(s: Scenario) -> str:
    return hashlib.sha256(s.text.encode("utf-8")).hexdigest()
