"""A check kept in the sealed archive of the run that made it, and found again by its key.

A run that judged something a later run may take instead of judging it again (a fixture
task's calibration, ``lab.workloads.calcache``; the backup evaluation's instrument check,
``lab.evaluate.instrument``) points its key at its sealed archive:
``<out>/.calibrations/<key>.json`` names the archive and the archive's SHA-256, nothing more.
A later run under the same ``--out`` takes nothing from the pointer alone: the archive must
still have that digest, pass ``lab verify`` (checksums, signature: with the configured key
when there is one) and hold, in its own ``results.json``, the record the caller then checks
against the same key.

    key = Key.of({"lab_source": lab_source_digest(), "kernel": "Linux 6.1 x86_64"})
    point(out, key.digest, archive_path, run_id)        # after a fresh check was sealed
    results, source = open_kept(out, key.digest, signer=signer, what="calibration")
    # results: that archive's results.json; source: {"archive", "archive_sha256", ...}

``open_kept`` raises one of ``KEPT_ERRORS`` with a sentence naming the archive when anything
does not hold; the caller says it and judges afresh.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lab
from lab.errors import LabError
from lab.evidence.signing import Signer
from lab.evidence.verify import verify_reading
from lab.host.digest import manifest_digest, sha256_file

#: the pointers' directory under ``--out``
POINTERS = ".calibrations"
#: the member a kept record is read from (at most ``Limits.max_read_size``)
RESULTS = "results.json"
#: what ``open_kept`` raises when a kept check cannot be taken
KEPT_ERRORS = (LabError, OSError, ValueError, KeyError, TypeError)


@dataclass(frozen=True)
class Key:
    """The SHA-256 of every input a kept check depends on, and those inputs by name (each
    a digest or a version text; recorded in results.json beside the check)."""

    digest: str
    parts: dict[str, Any]

    @classmethod
    def of(cls, parts: dict[str, Any]) -> Key:
        text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
        return cls(hashlib.sha256(text.encode()).hexdigest(), parts)


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


def pointer_path(out: Path, digest: str) -> Path:
    return out / POINTERS / f"{digest}.json"


def point(out: Path, digest: str, archive: Path, run_id: str) -> None:
    """Point ``digest`` at the sealed ``archive`` of run ``run_id`` (replacing any earlier
    pointer of the same key)."""
    pointer = pointer_path(out, digest)
    pointer.parent.mkdir(mode=0o700, exist_ok=True)
    record = {
        "key": digest,
        "archive": archive.name,
        "archive_sha256": sha256_file(archive),
        "run_id": run_id,
    }
    tmp = pointer.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp.replace(pointer)


def open_kept(
    out: Path, digest: str, *, signer: Signer | None, what: str
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The results.json of the verified archive ``digest`` points at, and where it came
    from (``reused_from``: the archive, its SHA-256, its run, what verified it); None
    without a pointer. Raises one of ``KEPT_ERRORS`` when the archive is gone, changed since
    ``what`` was kept, or fails verification."""
    pointer = pointer_path(out, digest)
    if not pointer.is_file():
        return None
    record = json.loads(pointer.read_text())
    archive = out / str(record["archive"])
    if archive.parent != out or archive.is_symlink() or not archive.is_file():
        raise ValueError(f"the archive {record['archive']} it points at is gone")
    archive_digest = sha256_file(archive)
    if archive_digest != record["archive_sha256"]:
        raise ValueError(f"{archive.name} changed since its {what} was kept")
    with tempfile.TemporaryDirectory(prefix="lab-kept-") as tmp:
        pubkey = None
        if signer is not None and not signer.is_ephemeral:
            pubkey = Path(tmp) / "lab.pub"
            pubkey.write_text(signer.public_key_file())
        # results.json is taken from the pass that verified it: the bytes the checks hashed
        report, read = verify_reading(archive, (RESULTS,), pubkey=pubkey)
    run_id = str(record["run_id"])
    if report.run_id != run_id:
        raise ValueError(f"{archive.name} holds run {report.run_id}, not {run_id}")
    if RESULTS not in read:
        raise ValueError(f"{archive.name} has no readable {RESULTS}")
    results = json.loads(read[RESULTS])
    if not isinstance(results, dict):
        raise ValueError(f"{archive.name}'s {RESULTS} is not a JSON object")
    signing = results.get("signing") or {}
    source = {
        "archive": archive.name,
        "archive_sha256": archive_digest,
        "run_id": run_id,
        "verified": f"{len(report.checks)} checks passed",
        "signing_key_id": signing.get("key_id"),
        "authenticity": "key holder" if pubkey is not None else "integrity only",
    }
    return results, source
