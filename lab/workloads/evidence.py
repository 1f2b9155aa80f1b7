"""A fixture-task run's evidence: ``results.json`` (the run's common record, with the task's
``evaluation`` or ``campaign`` beside it, validated against the results schema),
``report.md`` (:mod:`lab.reports.task`) and the signed archive, exactly as a backup run's.

    archive = write_task_run(result, run_dir, extra={"evaluation": judged.to_dict()},
                             report=lines, prepared=prepared, started_epoch=t0, say=print)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.model import RunResult
from lab.pipeline import Setup, seal
from lab.schemas import RESULTS_SCHEMA_FILE, schema_bytes, validate_results


def write_task_run(
    result: RunResult,
    run_dir: Path,
    *,
    extra: dict[str, Any],
    report: list[str],
    prepared: Setup,
    started_epoch: float,
    say: Callable[[str], None],
) -> Any:
    """Write results.json (validated) and report.md; sign and pack when there is a signer.
    Returns the archive's info, or None."""
    document = {"$schema": RESULTS_SCHEMA_FILE, **result.to_dict(), **extra}
    validate_results(document)
    (run_dir / RESULTS_SCHEMA_FILE).write_bytes(schema_bytes(RESULTS_SCHEMA_FILE))
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    (run_dir / "results.json").write_text(text, encoding="utf-8")
    (run_dir / "report.md").write_text("\n".join(report) + "\n", encoding="utf-8")
    if prepared.signer is None:
        return None
    # a fixture task's provenance: no scenarios, no observers (the same seal as a run's)
    return seal(
        result,
        run_dir,
        signer=prepared.signer,
        started_epoch=started_epoch,
        say=say,
        dependencies=[],
        scenarios=[],
        observers=False,
    )
