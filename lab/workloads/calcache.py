"""A fixture task's calibration, reused from the signed archive it came from when nothing it
depends on changed: the seeded patches are judged once, their verdicts kept in that run's
archive, and a later run with the same key takes them from there (shown as reused, with the
archive and its digest), never from memory or a side file alone.

    key = calibration_key(task, seeds, limits, log=log)  # CalibrationKey: .digest, .parts
    found = find_reusable(out, key, signer=signer, say=print)   # Calibration | None
    ...                                                  # (calibrate when None)
    remember(out, check, archive_path, run_id)           # after a fresh calibration is sealed

The key is the SHA-256 of every input a seed's verdict depends on: the task file, the
fixture's files, ``expected.yaml`` and every seed's patch, the lab's whole source (the
workload's oracle and harness included), the lab's version, the toolchain's version, strace's
version, the kernel and machine, and the task's evaluation id. ``<out>/.calibrations/<key>.json``
only points at an archive; the archive is verified (checksums, signature: with the
configured key when there is one) and its ``results.json`` must hold the same key and every
part of it, with every seed met, before anything is reused. ``--recalibrate`` skips the
lookup.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lab
from lab.evidence.kept import KEPT_ERRORS, POINTERS, Key, lab_source_digest, open_kept, point
from lab.evidence.signing import Signer
from lab.host import procs
from lab.host.digest import manifest_digest, sha256_file
from lab.workloads.calibrate import Calibration, Seed
from lab.workloads.judge import manifest
from lab.workloads.task import FixtureTask

__all__ = ["POINTERS", "CalibrationKey", "calibration_key", "find_reusable", "remember"]

#: the digest of every input and those inputs (``lab.evidence.kept.Key``)
CalibrationKey = Key


def evaluation_id(task: FixtureTask, limits: dict[str, Any]) -> str:
    """What defines a fixture task's judgement: its task file, its fixture's files and every
    bound its verification commands run under (``Verifier.limits()``), hashed."""
    frozen = json.dumps(limits, sort_keys=True).encode()
    return manifest_digest(
        {
            "task.yaml": task.sha256,
            **manifest(task.fixture_dir),
            "limits.json": hashlib.sha256(frozen).hexdigest(),
        }
    )


def _version(argv: list[str], what: str, log: procs.CommandLog | None) -> str:
    if procs.which(argv[0]) is None:
        return f"{argv[0]}: not installed"
    done = procs.run(
        argv,
        purpose=f"calibration key: {what}",
        log=log,
        tool=argv[0],
        timeout=60,
        accept=None,
        capture=True,
    )
    lines = (done.output or b"").decode("utf-8", "replace").strip().splitlines()
    return lines[0].strip() if lines else f"{argv[0]}: exit {done.exit_status}"


def calibration_key(
    task: FixtureTask,
    seeds: list[Seed],
    limits: dict[str, Any],
    *,
    log: procs.CommandLog | None,
) -> CalibrationKey:
    assert task.expected is not None
    toolchain = _version(["go", "version"], "the Go toolchain's version", log)
    parts: dict[str, Any] = {
        "task": task.sha256,
        "fixture": manifest_digest(manifest(task.fixture_dir)),
        "expected": sha256_file(task.expected),
        "seeds": {s.name: sha256_file(s.patch) for s in seeds},
        "lab_source": lab_source_digest(),
        "lab_version": lab.__version__,
        "toolchain": toolchain if task.toolchain == "go" else task.toolchain,
        "strace": _version(["strace", "-V"], "strace's version", log),
        "kernel": f"{platform.system()} {platform.release()} {platform.machine()}",
        "evaluation_id": evaluation_id(task, limits),
    }
    return Key.of(parts)


def remember(out: Path, check: Calibration, archive: Path | None, run_id: str) -> bool:
    """Point the key at the sealed archive of a calibration judged afresh and met (nothing
    for a reused one, an unsigned run or one never calibrated); True when it did."""
    if check.key is None or check.reused_from is not None or not check.ok or archive is None:
        return False
    point(out, check.key, archive, run_id)
    return True


def find_reusable(
    out: Path, key: CalibrationKey, *, signer: Signer | None, say: Callable[[str], None]
) -> Calibration | None:
    """The calibration kept in the archive the key points at, or None (and why, said)."""
    try:
        return _reuse(out, key, signer)
    except KEPT_ERRORS as error:
        say(f"Calibration: not reused ({error}); the seeds are judged again.")
        return None


def _reuse(out: Path, key: CalibrationKey, signer: Signer | None) -> Calibration | None:
    found = open_kept(out, key.digest, signer=signer, what="calibration")
    if found is None:
        return None
    results, source = found
    name = source["archive"]
    kept = _kept_calibration(results)
    if kept.get("key") != key.digest or kept.get("parts") != key.parts:
        raise ValueError(f"{name} holds a calibration under another key")
    seeds = kept["seeds"]
    if not seeds or not all(row["met"] for row in seeds.values()):
        raise ValueError(f"{name} holds a calibration that was not met")
    return Calibration(seeds=dict(seeds), key=key.digest, parts=dict(key.parts), reused_from=source)


def _kept_calibration(results: dict[str, Any]) -> dict[str, Any]:
    """The detailed calibration of an evaluation's or a campaign's results.json."""
    evaluation = results.get("evaluation")
    if isinstance(evaluation, dict) and isinstance(evaluation.get("calibration"), dict):
        kept: dict[str, Any] = evaluation["calibration"]
        return kept
    campaign = results.get("campaign")
    if isinstance(campaign, dict) and isinstance(campaign.get("instrument_check"), dict):
        kept = campaign["instrument_check"]
        return kept
    raise ValueError("its results.json holds no calibration")
