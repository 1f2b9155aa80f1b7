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
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lab
from lab.errors import LabError
from lab.evidence.signing import Signer
from lab.evidence.verify import verify_archive
from lab.host import procs
from lab.host.digest import sha256_file
from lab.workloads.calibrate import Calibration, Seed
from lab.workloads.judge import manifest, manifest_digest
from lab.workloads.task import FixtureTask

#: the pointers' directory under ``--out``
POINTERS = ".calibrations"
#: the largest results.json read back from an archive
_MAX_RESULTS = 64 * 1024 * 1024


@dataclass(frozen=True)
class CalibrationKey:
    digest: str
    #: every input by name -> its digest or version text (recorded in results.json)
    parts: dict[str, Any]


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


def lab_source_digest() -> str:
    """Every file of the lab's package (caches and compiled files left out)."""
    root = Path(lab.__file__).resolve().parent
    files = {
        p.relative_to(root).as_posix(): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts
        if p.suffix not in (".pyc", ".pyo")
    }
    return manifest_digest(files)


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
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return CalibrationKey(hashlib.sha256(text.encode()).hexdigest(), parts)


def _pointer(out: Path, digest: str) -> Path:
    return out / POINTERS / f"{digest}.json"


def remember(out: Path, check: Calibration, archive: Path | None, run_id: str) -> bool:
    """Point the key at the sealed archive of a calibration judged afresh and met (nothing
    for a reused one, an unsigned run or one never calibrated); True when it did."""
    if check.key is None or check.reused_from is not None or not check.ok or archive is None:
        return False
    pointer = _pointer(out, check.key)
    pointer.parent.mkdir(mode=0o700, exist_ok=True)
    record = {
        "key": check.key,
        "archive": archive.name,
        "archive_sha256": sha256_file(archive),
        "run_id": run_id,
    }
    tmp = pointer.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp.replace(pointer)
    return True


def find_reusable(
    out: Path, key: CalibrationKey, *, signer: Signer | None, say: Callable[[str], None]
) -> Calibration | None:
    """The calibration kept in the archive the key points at, or None (and why, said)."""
    pointer = _pointer(out, key.digest)
    if not pointer.is_file():
        return None
    try:
        found = _reuse(out, pointer, key, signer)
    except (LabError, OSError, ValueError, KeyError, TypeError, tarfile.TarError) as error:
        say(f"Calibration: not reused ({error}); the seeds are judged again.")
        return None
    return found


def _reuse(out: Path, pointer: Path, key: CalibrationKey, signer: Signer | None) -> Calibration:
    record = json.loads(pointer.read_text())
    archive = out / str(record["archive"])
    if archive.parent != out or archive.is_symlink() or not archive.is_file():
        raise ValueError(f"the archive {record['archive']} it points at is gone")
    digest = sha256_file(archive)
    if digest != record["archive_sha256"]:
        raise ValueError(f"{archive.name} changed since its calibration was kept")
    with tempfile.TemporaryDirectory(prefix="lab-calkey-") as tmp:
        pubkey = None
        if signer is not None and not signer.is_ephemeral:
            pubkey = Path(tmp) / "lab.pub"
            pubkey.write_text(signer.public_key_file())
        report = verify_archive(archive, pubkey=pubkey)
    results = _results_of(archive, str(record["run_id"]))
    kept = _kept_calibration(results)
    if kept.get("key") != key.digest or kept.get("parts") != key.parts:
        raise ValueError(f"{archive.name} holds a calibration under another key")
    seeds = kept["seeds"]
    if not seeds or not all(row["met"] for row in seeds.values()):
        raise ValueError(f"{archive.name} holds a calibration that was not met")
    signing = results.get("signing") or {}
    return Calibration(
        seeds=dict(seeds),
        key=key.digest,
        parts=dict(key.parts),
        reused_from={
            "archive": archive.name,
            "archive_sha256": digest,
            "run_id": str(record["run_id"]),
            "verified": f"{len(report.checks)} checks passed",
            "signing_key_id": signing.get("key_id"),
            "authenticity": "key holder" if pubkey is not None else "integrity only",
        },
    )


def _results_of(archive: Path, run_id: str) -> dict[str, Any]:
    with tarfile.open(archive, "r:gz") as tar:
        member = tar.getmember(f"{run_id}/results.json")
        if not member.isfile() or member.size > _MAX_RESULTS:
            raise ValueError(f"{archive.name} has no readable results.json")
        stream = tar.extractfile(member)
        assert stream is not None
        data: dict[str, Any] = json.loads(stream.read())
    return data


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
