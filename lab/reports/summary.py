"""The ``--json`` presenter of ``lab run`` and ``lab evaluate``: the verdict summary the
console draws, as one JSON document (validated against ``lab/schemas/run-summary.schema.json``
and ``evaluation-summary.schema.json``).

    document = run_summary(outcome.result, run_dir=outcome.run_dir, archive=outcome.archive)
    document = evaluation_summary(outcome)              # lab.evaluate.judge.EvaluationOutcome

It draws ``RunResult``, ``Evaluation`` and ``ArchiveInfo``; it computes nothing they lack
(the per-scenario reliability is ``RunResult.aggregate``, the judge's own rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab import __version__
from lab.model import RunResult
from lab.model.evaluation import Evaluation

if TYPE_CHECKING:
    from lab.evidence.archive import ArchiveInfo

#: what ``lab run``'s exit status means (README, "Exit status of lab run")
RUN_EXIT_MEANING = {
    0: "calibrated: every scenario executed and every observation matched its scenario's "
    "expectation (not: every backup was correct; the seeded scenarios fail on purpose)",
    1: "not calibrated: a scenario did not execute or an observation disagreed with its "
    "scenario's expectation",
}
#: what ``lab evaluate``'s exit status means
EVALUATION_EXIT_MEANING = {
    0: "the candidate passed every clause in every repetition of every condition",
    1: "the candidate did not pass every clause in every repetition of every condition "
    "(see status and clauses)",
}


def archive_summary(archive: ArchiveInfo | None) -> dict[str, Any] | None:
    """Where the signed archive is, its SHA-256, and the key id that signed it."""
    if archive is None:
        return None
    return {
        "path": str(archive.path),
        "sha256": archive.sha256,
        "checksum_file": str(archive.checksum_file),
        "files": archive.files,
        "key_id": archive.key_id,
        "ephemeral_key": archive.ephemeral,
    }


def scenario_rows(result: RunResult) -> list[dict[str, Any]]:
    """Per scenario: how many repetitions matched their expectations, the wording the
    console prints (capability for one repetition, reliability k/N from three on), and the
    judge's k/N per clause."""
    rows = []
    for row in result.aggregate:
        cal = row.calibration
        rows.append(
            {
                "scenario": row.scenario,
                "repetitions": row.repetitions,
                "as_expected_repetitions": cal.no_disagreement_repetitions,
                "fully_observed_repetitions": cal.met_repetitions,
                "failed_repetitions": list(row.failed_repetitions),
                "reliability": row.wording,
                "clauses": {name: tally.to_dict() for name, tally in row.clauses.items()},
            }
        )
    return rows


def _run_part(result: RunResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "executed": result.executed,
        "calibrated": result.calibrated,
        "calibration": result.calibration.to_dict(),
        "scenarios": scenario_rows(result),
        "unavailable_observers": {
            name: status.reason or "unavailable"
            for name, status in sorted(result.observers.items())
            if not status.available and status.detail.get("probed", True)
        },
    }


def run_summary(result: RunResult, *, run_dir: Path, archive: ArchiveInfo | None) -> dict[str, Any]:
    """``lab run --json``: the run's verdict summary; ``ok`` is the exit status's meaning."""
    status = 0 if result.calibrated else 1
    signing = archive_summary(archive)
    return {
        "kind": "run",
        "lab_version": __version__,
        "ok": status == 0,
        "exit_status": status,
        "exit_meaning": RUN_EXIT_MEANING[status],
        **_run_part(result),
        "run_dir": str(run_dir),
        "archive": signing,
        "signing_key_id": None if signing is None else signing["key_id"],
    }


def evaluation_summary(
    *,
    exit_status: int,
    evaluation: Evaluation | None,
    result: RunResult | None,
    run_dir: Path | None,
    archive: ArchiveInfo | None,
) -> dict[str, Any]:
    """``lab evaluate --json``: the candidate's verdict. Without ``evaluation`` the run was
    delegated to the lab image and stopped there before its own document (the CLI passes
    the image's document on, marked ``delegated_to_image``, when there is one)."""
    signing = archive_summary(archive)
    document: dict[str, Any] = {
        "kind": "evaluation",
        "lab_version": __version__,
        "ok": exit_status == 0,
        "exit_status": exit_status,
        "exit_meaning": EVALUATION_EXIT_MEANING.get(
            exit_status, "the evaluation stopped before a verdict (see stderr)"
        ),
        "delegated_to_image": evaluation is None,
        "evaluation": None if evaluation is None else _evaluation_part(evaluation),
        "run": None if result is None else _run_part(result),
        "run_dir": None if run_dir is None else str(run_dir),
        "archive": signing,
        "signing_key_id": None if signing is None else signing["key_id"],
    }
    return document


def _evaluation_part(evaluation: Evaluation) -> dict[str, Any]:
    timing, check = evaluation.timing, evaluation.instrument_check
    ratio = timing.ratio if timing is not None and timing.ratio else {}
    return {
        "evaluation_id": evaluation.evaluation_id,
        "status": evaluation.status,
        "status_reason": evaluation.status_reason,
        "instrument_ok": None if check is None else check.ok,
        "instrument_reused_from": None if check is None else check.reused_from,
        "clauses": {
            clause: {**row.to_dict(), "exercised": row.exercised}
            for clause, row in sorted((evaluation.clauses or {}).items())
        },
        "timing": {
            "first_backup_wall_ratio": ratio.get("first_backup_wall"),
            "ratio": dict(ratio),
            "ratio_interval": {} if timing is None else dict(timing.ratio_interval or {}),
            "interval_method": None if timing is None else timing.interval_method,
            "rounds": None if timing is None else timing.rounds,
            "rounds_rule": (
                None
                if timing is None or timing.rounds_rule is None
                else timing.rounds_rule.to_dict()
            ),
            "floor_share_first_backup_wall": (
                None if timing is None else timing.floor_share("first_backup_wall")
            ),
            "skipped": evaluation.timing_skipped,
        },
    }
