"""A fixture-task run's evidence: ``results.json`` (the run's common record, with the task's
``evaluation`` or ``campaign`` beside it, validated against the results schema),
``report.md`` (:mod:`lab.reports.task`) and the signed archive, exactly as a backup run's.

    archive = write_task_run(result, run_dir, extra={"evaluation": judged.to_dict()},
                             prepared=prepared, started_epoch=t0, say=print)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.model import RunResult
from lab.pipeline import Setup, seal
from lab.reports.html import render_html
from lab.reports.markdown import render_markdown
from lab.reports.pdf import render_pdf
from lab.reports.task import task_outline
from lab.schemas import RESULTS_SCHEMA_FILE, schema_bytes, validate_results

if TYPE_CHECKING:
    from lab.evidence.signing import Signer


def write_task_run(
    result: RunResult,
    run_dir: Path,
    *,
    extra: dict[str, Any],
    prepared: Setup,
    started_epoch: float,
    say: Callable[[str], None],
) -> Any:
    """Write results.json (validated) and report.md, report.pdf and report.html (one
    outline, :mod:`lab.reports.task`); sign and pack when there is a signer. Returns the
    archive's info, or None."""
    return write_task_results(
        result, run_dir, extra=extra, signer=prepared.signer, started_epoch=started_epoch, say=say
    )


def write_task_results(
    result: RunResult,
    run_dir: Path,
    *,
    extra: dict[str, Any],
    signer: Signer | None,
    started_epoch: float,
    say: Callable[[str], None],
    dependencies: list[dict[str, Any]] | None = None,
) -> Any:
    """:func:`write_task_run` with its signer given (``lab merge``'s) and the further inputs
    its provenance names (a merged campaign's shard archives)."""
    document = {"$schema": RESULTS_SCHEMA_FILE, **result.to_dict(), **extra}
    validate_results(document)
    (run_dir / RESULTS_SCHEMA_FILE).write_bytes(schema_bytes(RESULTS_SCHEMA_FILE))
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    (run_dir / "results.json").write_text(text, encoding="utf-8")
    sections = task_outline(document)
    (run_dir / "report.md").write_text(
        render_markdown(result, files=None, outline=sections), encoding="utf-8"
    )
    say("Drawing the PDF report…")
    render_pdf(result, run_dir / "report.pdf", files=None, outline=sections)
    html = render_html(result, files=None, outline=sections)
    (run_dir / "report.html").write_text(html, encoding="utf-8")
    if signer is None:
        return None
    # a fixture task's provenance: no scenarios, no observers (the same seal as a run's)
    return seal(
        result,
        run_dir,
        signer=signer,
        started_epoch=started_epoch,
        say=say,
        dependencies=dependencies or [],
        scenarios=[],
        observers=False,
    )
