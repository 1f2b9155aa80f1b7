"""``lab evaluate --task TASK --tree DIR | --patch FILE``: judge one candidate of a fixture
task, after checking the task itself (its untouched fixture must fail the stated
verification; its seeded patches must each break exactly the clauses they name).

    outcome = execute(TaskEvaluationRequest(task_path=Path("campaigns/safe-store/task.yaml"),
                                            kind="patch", path=Path("fix.diff"), local=True),
                      say=print)
    outcome.exit_status        # 0 only when the candidate meets the task
    outcome.evaluation.clauses["S1"], outcome.archive.path

``open_task_run`` / ``check_task`` are shared with ``lab campaign`` (:mod:`lab.workloads.campaign`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lab.errors import TaskError
from lab.host import identity, procs
from lab.host.clock import epoch_to_rfc3339
from lab.model import RunResult
from lab.model.task import TaskEvaluation
from lab.pipeline import Setup, make_result, new_run_id, open_run, setup
from lab.run.shard import check_run_id
from lab.workloads.calcache import calibration_key, find_reusable, remember
from lab.workloads.calibrate import Calibration, Seed, calibrate, load_expected
from lab.workloads.evidence import write_task_run
from lab.workloads.judge import judge, prepare, run_oracle
from lab.workloads.task import FixtureTask, load_fixture_task
from lab.workloads.verify import Verifier


@dataclass(frozen=True, kw_only=True)
class TaskEvaluationRequest:
    task_path: Path
    kind: Literal["tree", "patch"]
    path: Path
    repetitions: int | None = None
    out: Path = Path("artifacts")
    local: bool = False
    json: bool = False
    #: judge the seeded patches first and refuse when they are not caught (the default)
    calibrate: bool = True
    #: judge the seeds again even when a kept calibration matches every key
    recalibrate: bool = False
    run_id: str | None = None


@dataclass(frozen=True)
class TaskOutcome:
    exit_status: int
    evaluation: TaskEvaluation | None = None
    run_dir: Path | None = None
    archive: Any = None
    document: dict[str, Any] | None = None


@dataclass
class TaskRun:
    """An open run of a fixture task: its directory, sandbox, verifier and scratch space."""

    task: FixtureTask
    prepared: Setup
    run_id: str
    run_dir: Path
    verifier: Verifier
    log: procs.CommandLog
    scratch: tempfile.TemporaryDirectory[str]
    started: float = field(default_factory=time.time)

    def close(self) -> None:
        self.prepared.close()
        self.scratch.cleanup()

    def result(self, options: dict[str, Any]) -> RunResult:
        client = self.task.fixture_dir / self.task.editable[0]
        return make_result(
            run_id=self.run_id,
            started=epoch_to_rfc3339(self.started),
            options={"task": self.task.path.name, "task_sha256": self.task.sha256, **options},
            prepared=self.prepared,
            packets="off",
            scenario_results=[],
            client=client,
        )


def open_task_run(
    task: FixtureTask, out: Path, run_id: str | None, kind: str, say: Callable[[str], None]
) -> TaskRun:
    if task.toolchain == "go":
        procs.require_tool("go")
    prepared = setup("none", "off", archive=True, say=say)
    rid = check_run_id(run_id) if run_id else new_run_id(kind)
    run_dir = open_run(prepared, out, rid, sandbox="required")
    assert prepared.sandbox is not None
    log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
    scratch = tempfile.TemporaryDirectory(prefix="lab-task-")
    Path(scratch.name).chmod(0o700)
    verifier = Verifier(prepared.sandbox, task, work=Path(scratch.name), log=log)
    (run_dir / "task").mkdir()
    (run_dir / "task" / "task.yaml").write_text(task.raw)
    return TaskRun(task, prepared, rid, run_dir, verifier, log, scratch)


def check_task(
    run: TaskRun, *, calibrate_it: bool, say: Callable[[str], None], recalibrate: bool = False
) -> tuple[dict[str, Any], Calibration | None]:
    """The untouched fixture must fail one of the baseline commands (its runs also warm the
    build cache); then, unless skipped, every seed must break exactly what it names (judged
    here, or reused from the archive of a run with the same key unless ``recalibrate``).
    Raises TaskError (one sentence) otherwise."""
    task = run.task
    seeds = load_expected(task) if calibrate_it else []
    say(f"Baseline: the untouched fixture must fail {', '.join(task.baseline_commands)}")
    oracle: dict[str, Any] = {}

    def warm_oracle(seed: Path) -> None:
        """The oracle on the untouched fixture: its harness build warms the cache once per
        run, and its verdicts on the vulnerable fixture are kept beside the baseline."""
        if any(c.oracle for c in task.clauses.values()):
            say("Baseline: the workload's oracle on the untouched fixture (warming its build)")
            record, found = run_oracle(
                task,
                task.fixture_dir,
                run.verifier,
                run.run_dir / "baseline" / "oracle",
                cache=seed,
            )
            oracle.update(record=record, verdicts={c: v.to_dict() for c, v in found.items()})

    results = run.verifier.warm(task.fixture_dir, run.run_dir / "baseline", also=warm_oracle)
    broken = [
        r
        for r in results.values()
        if r.sandbox_error is None and r.id in task.baseline_commands and not r.passed
    ]
    lost = [r for r in results.values() if r.sandbox_error is not None]
    baseline = {
        "must": "fail",
        "commands": {cid: r.to_dict() for cid, r in results.items()},
        "status": "fail" if broken else "pass",
        "oracle": oracle or None,
    }
    if lost:
        raise TaskError(
            f"the sandbox could not run {lost[0].id} on the untouched fixture "
            f"({lost[0].sandbox_error}); {task.path} cannot be judged here."
        )
    if not broken:
        raise TaskError(
            f"the untouched fixture of {task.path} passes {', '.join(task.baseline_commands)}, "
            f"but the task requires a failing baseline; it refuses to run (evidence kept in "
            f"{run.run_dir / 'baseline'})."
        )
    if not calibrate_it:
        return baseline, None
    return baseline, _calibration(run, seeds, recalibrate=recalibrate, say=say)


def _calibration(
    run: TaskRun, seeds: list[Seed], *, recalibrate: bool, say: Callable[[str], None]
) -> Calibration:
    task = run.task
    key = calibration_key(task, seeds, run.verifier.limits(), log=run.log)
    if not recalibrate:
        found = find_reusable(run.run_dir.parent, key, signer=run.prepared.signer, say=say)
        if found is not None and found.reused_from is not None:
            say(
                f"Calibration: {found.met}/{found.total} seeds met, reused from "
                f"{found.reused_from['archive']} (sha256 {found.reused_from['archive_sha256']}, "
                f"key {key.digest}); --recalibrate judges them again"
            )
            return found
    check = calibrate(task, seeds, run.verifier, run.run_dir / "calibration", log=run.log, say=say)
    check.key, check.parts = key.digest, dict(key.parts)
    if not check.ok:
        raise TaskError(
            f"the contract of {task.path} is not calibrated: {check.first_miss()}; it refuses to "
            f"judge (evidence kept in {run.run_dir / 'calibration'})."
        )
    return check


def _calibration_counts(check: Calibration | None) -> dict[str, Any]:
    """results.json's ``calibration``: of a task run, its seeds (0 of 0 when skipped)."""
    return {"met": 0, "total": 0} if check is None else check.counts()


def keep_calibration(run: TaskRun, check: Calibration | None, archive: Any) -> None:
    """Point the calibration's key at this run's sealed archive (a fresh, met one only)."""
    if check is not None and archive is not None:
        remember(run.run_dir.parent, check, Path(archive.path), run.run_id)


def execute(request: TaskEvaluationRequest, *, say: Callable[[str], None]) -> TaskOutcome:
    task = load_fixture_task(request.task_path)
    if not request.path.exists():
        raise TaskError(f"--{request.kind} {request.path}: no such file or directory.")
    if not request.local and not identity.in_lab_image():
        say(
            "lab evaluate --task runs on this host (it is not handed to the lab image); "
            "results.json records where (environment.in_container)."
        )
    repetitions = request.repetitions or task.eval_repetitions
    run = open_task_run(task, request.out, request.run_id, "evaluation", say)
    try:
        baseline, check = check_task(
            run, calibrate_it=request.calibrate, say=say, recalibrate=request.recalibrate
        )
        say(f"Judging {request.path.name} ({repetitions} repetition(s))")
        with tempfile.TemporaryDirectory(prefix="lab-cand-", dir=run.verifier.work) as tmp:
            cand = prepare(task, request.kind, request.path, Path(tmp), log=run.log)
            judged = judge(task, cand, run.verifier, run.run_dir, repetitions=repetitions, say=say)
        judged.calibration = None if check is None else check.to_dict()
        result = run.result({"mode": "evaluate-task", "repetitions": repetitions})
        document = judged.to_dict()
        document["baseline"] = baseline
        document["limits"] = run.verifier.limits()
        archive = write_task_run(
            result,
            run.run_dir,
            extra={"evaluation": document, "calibration": _calibration_counts(check)},
            prepared=run.prepared,
            started_epoch=run.started,
            say=say,
        )
        keep_calibration(run, check, archive)
    finally:
        run.close()
    return TaskOutcome(
        exit_status=0 if judged.status == "pass" else 1,
        evaluation=judged,
        run_dir=run.run_dir,
        archive=archive,
    )
