"""Candidate evaluation: judge a client someone else wrote against the frozen contract.

1. Freeze: the contract, scenarios, fixture, limits and the lab's own version are hashed
   into an evaluation id, recorded before the candidate runs.
2. Prepare the candidate in a workspace *copy* and build it (:mod:`lab.evaluate.candidate`);
   a failed build is a result.
3. Check the instrument first: the seeded ``false-success`` and ``unexpected-egress`` run on
   the same machine with the same collectors; if the lab does not catch them, it refuses to
   judge. A check kept by an earlier evaluation under the same ``--out`` and key (the same
   boot, lab, seeded client, collectors and tools) is reused instead, and said so
   (:mod:`lab.evaluate.instrument`).
4. Run the contract conditions N times (fresh state each), judge C1–C6 from independent
   evidence; time the candidate and the baseline untraced, in alternation
   (:mod:`lab.evaluate.timing`). With ``--shard I/N`` only that shard's condition ×
   repetition units are judged, after the instrument check, and only shard 1 is timed
   (:mod:`lab.evaluate.shard`); ``lab merge`` concludes the whole.

    outcome = execute(EvaluationRequest(kind="patch", path=Path("agent.patch")), say=print)
    outcome.evaluation["status"], outcome.archive, outcome.exit_status

``execute`` prints nothing: progress goes to ``say`` and the CLI draws the outcome.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lab import __version__, resources
from lab.errors import UsageError
from lab.evaluate import floor, timing
from lab.evaluate.candidate import BUILD_TIMEOUT_S, build, prepare
from lab.evaluate.instrument import Lookup, instrument, keep
from lab.evaluate.request import EvaluationRequest
from lab.evaluate.shard import EvaluationShard, plan_shard
from lab.evaluate.verdicts import CALIBRATION_SCENARIOS, conclude, hung_invocations, hung_reason
from lab.evidence.archive import ArchiveInfo
from lab.host import identity, procs
from lab.host.clock import epoch_to_rfc3339
from lab.host.digest import sha256_file
from lab.model import RunResult, ScenarioResult
from lab.model.evaluation import (
    Evaluation,
    EvaluationLimits,
    Fixture,
    FrozenEvaluation,
    Timing,
)
from lab.model.timing import TARGET_HALF_WIDTH
from lab.pipeline import (
    REPO,
    Drawer,
    Setup,
    drawer,
    finish,
    make_result,
    new_run_id,
    open_run,
    run_plan,
    setup,
    warm_imports,
)
from lab.run.options import check_count, check_run_options
from lab.run.plan import Plan
from lab.run.schedule import MAX_JOBS, default_jobs
from lab.run.shard import check_run_id
from lab.sandbox import SandboxSettings
from lab.workloads.backup import scenario

#: files whose content defines what "passing" means; their hash is the evaluation id
FROZEN_FILES = (
    "lab/workloads/backup/contract.py",
    "lab/workloads/backup/calibration.py",
    "lab/workloads/backup/receiver.py",
    "lab/workloads/backup/records.py",
    "lab/workloads/backup/store.py",
    "lab/workloads/backup/upload.py",
    "lab/workloads/backup/backup_check.py",
    "lab/workloads/backup/protocol.py",
    "lab/workloads/backup/fixture.py",
    "docs/client-contract.md",
    "docs/protocol.md",
)


def frozen_limits(request: EvaluationRequest) -> EvaluationLimits:
    """The limits an evaluation (or a campaign's, ``request`` its settled one) freezes:
    the time limits, the timing rounds' rule and every bound of the sandbox."""
    return EvaluationLimits(
        invocation_timeout_s=request.timeout_s,
        build_timeout_s=BUILD_TIMEOUT_S,
        timing_runs=request.timing_runs,
        timing_max_runs=request.timing_cap,
        timing_target_half_width=TARGET_HALF_WIDTH,
        timing_metrics=request.timing_metrics,
        # every bound of the sandbox a judged or timed invocation runs in (time above)
        sandbox=SandboxSettings().to_dict(),
    )


def freeze(
    conditions: list[scenario.Scenario],
    *,
    size: int,
    repetitions: int,
    limits: EvaluationLimits,
) -> FrozenEvaluation:
    """Everything that defines the judgement, hashed before the candidate runs."""
    files = {rel: sha256_file(REPO / rel) for rel in FROZEN_FILES if (REPO / rel).is_file()}
    for s in conditions:
        files[f"scenarios/candidate/{s.path.name}"] = hashlib.sha256(s.text.encode()).hexdigest()
    fixture = Fixture(generator="shake_256 lab-fixture-v1", size=size)
    # the id hashes the record without itself: the same inputs always give the same id
    unnamed = {
        "lab_version": __version__,
        "files": files,
        "fixture": fixture.to_dict(),
        "repetitions": repetitions,
        "limits": limits.to_dict(),
    }
    blob = json.dumps(unnamed, sort_keys=True).encode()
    return FrozenEvaluation(
        evaluation_id="eval-" + hashlib.sha256(blob).hexdigest()[:16],
        lab_version=__version__,
        files=files,
        fixture=fixture,
        repetitions=repetitions,
        limits=limits,
    )


@dataclass(frozen=True)
class EvaluationOutcome:
    """What an evaluation produced. When it was delegated to the lab image, only the exit
    status comes back here (the evaluation record is in that run's archive), and with
    ``json`` the image's own ``--json`` document."""

    #: 0 only when every clause passed in every repetition of every condition
    exit_status: int
    evaluation: Evaluation | None = None
    result: RunResult | None = None
    run_dir: Path | None = None
    archive: ArchiveInfo | None = None
    #: the lab image's ``--json`` document (host paths), when delegated with ``json``
    document: dict[str, Any] | None = None


def execute(request: EvaluationRequest, *, say: Callable[[str], None]) -> EvaluationOutcome:
    """Freeze, prepare, check the instrument, judge, time, write and sign; print nothing."""
    # the PDF's drawer is forked first, before any thread of the evaluation exists
    with drawer() as pdf:
        return _execute(request, say=say, pdf=pdf)


def _execute(
    request: EvaluationRequest, *, say: Callable[[str], None], pdf: Drawer | None
) -> EvaluationOutcome:
    check_run_options(
        repetitions=request.repetitions,
        size=request.size,
        timeout_s=request.timeout_s,
        out=request.out,
        client=None,  # the candidate is built later, in a copy
    )
    request.check_timing()
    if not request.local and not identity.in_lab_image():
        return _in_image(request)

    conditions = scenario.select(resources.scenarios_dir() / "candidate", [], True)
    calibration = scenario.select(resources.scenarios_dir(), list(CALIBRATION_SCENARIOS), False)
    limits = frozen_limits(request)
    given = request.path
    if not given.exists():
        raise UsageError(f"{given}: no such file or directory; give the candidate's path.")
    frozen = freeze(conditions, size=request.size, repetitions=request.repetitions, limits=limits)
    # a shard's units and ids are settled before anything is written or started
    part = None if request.shard is None else plan_shard(request, conditions, frozen)
    prepared: Setup = setup(request.collector, request.packets, archive=True, say=say)

    if part is not None:
        run_id = part.run_id
    else:
        run_id = check_run_id(request.run_id) if request.run_id else new_run_id("eval")
    # a candidate is untrusted code: it only ever runs in the sandbox, judged or timed
    jobs = default_jobs() if request.jobs is None else request.jobs
    check_count(jobs, "--jobs", MAX_JOBS)
    run_dir = open_run(prepared, request.out, run_id, sandbox="required", jobs=jobs)
    prepared.later.add(warm_imports)
    try:
        return _evaluate(
            request, prepared, frozen, (run_id, part), run_dir, conditions, calibration, say, pdf
        )
    finally:
        prepared.close()


def _evaluate(
    request: EvaluationRequest,
    prepared: Setup,
    frozen: FrozenEvaluation,
    ids: tuple[str, EvaluationShard | None],
    run_dir: Path,
    conditions: list[scenario.Scenario],
    calibration: list[scenario.Scenario],
    say: Callable[[str], None],
    pdf: Drawer | None = None,
) -> EvaluationOutcome:
    given = request.path
    run_id, part = ids
    frozen_json = json.dumps(frozen.to_dict(), indent=2, sort_keys=True) + "\n"
    (run_dir / "evaluation.json").write_text(frozen_json)
    say(
        f"Evaluation {frozen.evaluation_id} frozen before the candidate runs: "
        f"{run_dir / 'evaluation.json'}"
        + (
            f"; shard {part.spec} of run {part.frozen_id}: {len(part.units)} unit(s)"
            if part is not None
            else ""
        )
    )
    started_epoch = time.time()
    log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
    kind = request.kind
    cand_dir = run_dir / "candidate"
    cand_dir.mkdir()
    if kind == "patch":
        shutil.copyfile(given, cand_dir / "candidate.patch")
    elif kind == "source-dir":
        shutil.copytree(given, cand_dir / "source", ignore=shutil.ignore_patterns(".git", "*.o"))

    # the instrument check's key and kept check are looked up while the candidate builds
    lookup = Lookup(request, prepared, run_dir.parent, calibration)
    with tempfile.TemporaryDirectory(prefix="lab-candidate-") as tmp:
        try:
            candidate = prepare(kind, given, Path(tmp), log)
            for name in ("patch.log", "patch.err"):
                if (Path(tmp) / name).exists():
                    shutil.copyfile(Path(tmp) / name, cand_dir / name)
            build(candidate, log, cand_dir)
        except BaseException:
            lookup.abandon()
            raise
        say(f"Candidate ({kind}): {candidate.build.status}")
        scenario_results: list[ScenarioResult] = []
        if candidate.binary is None:
            lookup.abandon()
            evaluation = Evaluation(
                frozen=frozen,
                candidate=candidate.describe(),
                status="patch-failed"
                if candidate.build.status == "patch-failed"
                else "build-failed",
                status_reason="the candidate could not be built; see its build log",
            )
        else:
            record = Evaluation(frozen=frozen, candidate=candidate.describe(), status="fail")
            shutil.copyfile(candidate.binary, cand_dir / "candidate-client")
            evaluation, scenario_results = _judge(
                request,
                record,
                candidate.binary,
                prepared,
                run_dir,
                (conditions, calibration, part),
                say,
                lookup,
            )
    result: RunResult = make_result(
        run_id=run_id,
        started=epoch_to_rfc3339(started_epoch, "microseconds"),
        options=request.options("evaluate", [s.name for s in conditions]),
        prepared=prepared,
        packets=request.packets,
        scenario_results=scenario_results,
        client=cand_dir / "candidate-client",
        run_dir=run_dir,
    )
    result.evaluation = evaluation
    result.shard = None if part is None else part.record
    archive = finish(
        result, run_dir, signer=prepared.signer, started_epoch=started_epoch, say=say, drawer=pdf
    )
    if archive is not None and keep(
        run_dir.parent, evaluation.instrument_check, archive.path, run_id
    ):
        say(f"Instrument check kept for later evaluations under {run_dir.parent}")
    return EvaluationOutcome(
        exit_status=0 if evaluation.status == "pass" else 1,
        evaluation=evaluation,
        result=result,
        run_dir=run_dir,
        archive=archive,
    )


def _in_image(request: EvaluationRequest) -> EvaluationOutcome:
    """Run this very evaluation inside the lab image (built and cached by lab.container),
    with the candidate mounted read-only; the archive lands in the host's --out."""
    from lab.container import run as container

    host: Path = request.path.resolve()
    if not host.exists():
        raise UsageError(f"{host}: no such file or directory; give the candidate's path.")
    inside = f"/lab/candidate/{host.name}"
    argv = request.argv(candidate=inside, out=container.CONTAINER_ARTIFACTS)
    status, document = container.delegate(
        REPO, argv, out=request.out, json_document=request.json, mounts=((host, inside),)
    )
    return EvaluationOutcome(exit_status=status, document=document)


def _judge(
    request: EvaluationRequest,
    record: Evaluation,
    binary: Path,
    prepared: Setup,
    run_dir: Path,
    scenarios: tuple[list[scenario.Scenario], list[scenario.Scenario], EvaluationShard | None],
    say: Callable[[str], None],
    lookup: Lookup,
) -> tuple[Evaluation, list[ScenarioResult]]:
    """Check the instrument (its key and kept check from ``lookup``), then judge and time
    the built candidate (a shard: its units, timed in shard 1 only); ``record`` (frozen
    part and candidate) comes back completed."""
    conditions, calibration, part = scenarios
    check, cal_results = instrument(request, prepared, run_dir, calibration, say, lookup)
    if not check.ok:
        why = (
            "the instrument did not catch the seeded defects on this machine with these "
            "collectors, so it refuses to judge the candidate"
        )
        refused = replace(record, status="refused", status_reason=why, instrument_check=check)
        return refused, cal_results
    judged, results = judge_built(
        request,
        record,
        binary,
        prepared,
        run_dir,
        conditions,
        say,
        untimed=None if part is None else part.untimed,
        units=None if part is None else part.units,
    )
    return replace(judged, instrument_check=check), cal_results + results


def judge_built(
    request: EvaluationRequest,
    record: Evaluation,
    binary: Path,
    prepared: Setup,
    run_dir: Path,
    conditions: list[scenario.Scenario],
    say: Callable[[str], None],
    *,
    untimed: str | None = None,
    timing_size: int | None = None,
    units: list[tuple[str, int]] | None = None,
) -> tuple[Evaluation, list[ScenarioResult]]:
    """Judge a built candidate under ``conditions`` × repetitions (or only ``units``, a
    shard's) and time it untraced against the baseline, unless ``untimed`` says why not (the
    baseline itself, a shard other than the timing one), at ``timing_size`` bytes when given
    (a campaign's speed goal), else the judged size."""
    seeded = resources.native_client()
    say(
        f"Judging the candidate: {len(conditions)} conditions × {request.repetitions} repetitions"
        + ("" if units is None else f", {len(units)} of them in this shard")
    )
    plan = Plan(
        scenarios=conditions,
        passes=prepared.passes,
        packets=request.packets,
        repetitions=request.repetitions,
        size=request.size,
        client=binary,
        client_kind="candidate",
        timeout_s=request.timeout_s,
        unavailable=prepared.skipped,
        seed="candidate",
        units=units,
        jobs=prepared.jobs,
    )
    results = run_plan(plan, run_dir, prepared, say)
    hung = hung_invocations(results)
    timing_result: Timing | None = None
    timing_skipped: str | None = untimed
    if untimed is not None:
        say(f"Untraced timing skipped: {untimed}")
    elif hung:
        # a candidate that hangs would only spend the rounds waiting for its time limit
        timing_skipped = hung_reason(hung, request.timeout_s)
        say(f"Untraced timing skipped: {timing_skipped}")
    else:
        say(
            f"Untraced timing: {request.timing_runs} to {request.timing_cap} rounds (until "
            f"the ratio's 95 % interval is within ±{100 * TARGET_HALF_WIDTH:g} %; the rounds "
            "after the least time only what the deciding ratios need), baseline, candidate "
            "and the instrument floor's reference uploader alternated…"
        )
        log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
        with tempfile.TemporaryDirectory(prefix="lab-timing-") as scratch:
            reference = floor.build(Path(scratch) / "floor", log)
            clients = {"baseline": seeded, "candidate": binary}
            if reference.binary is not None:
                clients["floor"] = reference.binary
            else:
                say(f"Instrument floor not measured: {reference.reason}")
            timing_result = timing.alternate(
                clients,
                rounds=request.timing_runs,
                max_rounds=request.timing_cap,
                metrics=request.timing_metrics,
                size=timing_size or request.size,
                workdir=Path(scratch),
                log=log,
                timeout=request.timeout_s,
                sandbox=prepared.sandbox,
                floor=reference.describe(),
            )
    judged = conclude(
        record,
        results,
        size=request.size,
        timing=timing_result,
        timing_skipped=timing_skipped,
    )
    return judged, results
