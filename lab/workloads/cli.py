"""The command-line handlers of fixture tasks, reached from ``lab._cli`` when ``lab evaluate``
gets ``--task`` or ``lab campaign`` gets a ``campaigns/*/task.yaml``: they build the typed
request, run it, and draw the outcome (human text, or with ``--json`` one document on stdout).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console

from lab.errors import UsageError


def _emit(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()


def evaluate_task(args: argparse.Namespace, human: Console) -> int:
    from lab.workloads.evaluate import TaskEvaluationRequest, execute

    if args.task is None:
        raise UsageError("--tree judges a candidate of a task; give --task TASK with it.")
    if args.tree is None and args.patch is None:
        raise UsageError("--task needs the candidate: --tree DIR or --patch FILE.")
    request = TaskEvaluationRequest(
        task_path=args.task,
        kind="tree" if args.tree is not None else "patch",
        path=args.tree if args.tree is not None else args.patch,
        repetitions=args.repetitions,
        out=args.out,
        local=args.local,
        json=args.json,
        calibrate=not args.skip_calibration,
        recalibrate=args.recalibrate,
        run_id=args.run_id,
    )
    outcome = execute(request, say=lambda msg: human.print(msg, highlight=False, markup=False))
    judged = outcome.evaluation
    if judged is not None:
        human.print(
            f"Task evaluation: {judged.status}"
            + (f" — {judged.status_reason}" if judged.status_reason else ""),
            highlight=False,
            markup=False,
        )
        for cid, n in (judged.clauses or {}).items():
            human.print(
                f"  {cid}: {n.passed}/{n.total} passed ({n.failed} fail, "
                f"{n.not_observed} not observed)",
                highlight=False,
                markup=False,
            )
        for finding in judged.candidate.findings():
            human.print(f"  finding: {finding}", highlight=False, markup=False)
    if outcome.archive is not None:
        human.print(f"Archive: {outcome.archive.path}", highlight=False, markup=False)
    if args.json:
        document = outcome.document or {
            "exit_status": outcome.exit_status,
            "status": None if judged is None else judged.status,
            "status_reason": None if judged is None else judged.status_reason,
            "clauses": {}
            if judged is None or judged.clauses is None
            else {c: n.to_dict() for c, n in judged.clauses.items()},
            "run_dir": None if outcome.run_dir is None else str(outcome.run_dir),
            "archive": None if outcome.archive is None else str(outcome.archive.path),
        }
        _emit(document)
    return outcome.exit_status
