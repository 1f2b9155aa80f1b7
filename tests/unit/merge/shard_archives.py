"""Signed shard archives made in a test (no client runs), and the one-sentence refusal check
every merge test shares.

    archive = pack_shard(run, tmp_path / "s", signer)     # run: a RunResult with .shard
    refused([a, b], pubkey, tmp_path, "differ in run id")
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.errors import ArchiveError
from lab.evidence.archive import write_archive
from lab.evidence.provenance import ProvenanceInputs
from lab.evidence.signing import Signer
from lab.merge.combine import MergeRequest, merge
from lab.model import RunResult
from lab.pipeline import write_results


def pack_shard(
    run: RunResult, out: Path, signer: Signer, scenario_files: list[str], **extra: str
) -> Path:
    """``run``'s directory as a shard writes it (each unit's result, the scenario files, a
    timeline, ``extra`` files by relative path), signed and archived."""
    run_dir = out / run.run_id
    (run_dir / "scenarios").mkdir(parents=True)
    for name in scenario_files:
        (run_dir / "scenarios" / f"{name}.yaml").write_text(f"name: {name}\n")
    for s in run.scenarios:
        unit = run_dir / s.name / f"r{s.repetition}"
        unit.mkdir(parents=True)
        (unit / "result.json").write_text(json.dumps(s.to_dict(), sort_keys=True))
    (run_dir / "timeline.jsonl").write_text(json.dumps({"ts": 1, "source": "lab"}) + "\n")
    for rel, text in extra.items():
        (run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / rel).write_text(text)
    write_results(run, run_dir)  # results.json and the results.schema.json it names
    inputs = ProvenanceInputs(
        run_id=run.run_id, started_on=run.started_at, finished_on=run.finished_at, scenarios=[]
    )
    return write_archive(run_dir, signer=signer, provenance_inputs=inputs, epoch=0).path


def refused(archives: list[Path], pubkey: Path, tmp_path: Path, *needles: str) -> str:
    with pytest.raises(ArchiveError) as caught:
        merge(MergeRequest(archives=archives, pubkey=pubkey, out=tmp_path / "m"), say=print)
    message = str(caught.value)
    for needle in needles:
        assert needle in message, message
    assert "\n" not in message and "Traceback" not in message
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())
    return message
