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

from lab import __version__
from lab.host import identity
from lab.model import RunResult
from lab.pipeline import Setup
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
    from lab.evidence.archive import write_archive
    from lab.evidence.provenance import LOCAL_BUILDER_ID, ProvenanceInputs

    env = result.environment
    image = env.get("image") or {}
    inputs = ProvenanceInputs(
        run_id=result.run_id,
        started_on=result.started_at,
        finished_on=result.finished_at,
        scenarios=[],
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
        internal={"image": image or None, "in_container": env.get("in_container")},
        dependencies=[],
    )
    say("Signing and packing the evidence archive…")
    return write_archive(
        run_dir, signer=prepared.signer, provenance_inputs=inputs, epoch=int(started_epoch)
    )
