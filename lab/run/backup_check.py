"""The independent verifier: compares the saved backup's SHA-256 with the source's.

It shares no code path with the receiver: it reads the receiver's store directory from
disk, as a reviewer would, and hashes the file itself.

    check = verify(source=state / "source.bin", backup=state / "receiver/store/backup.bin")
    assert check.matches_source
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lab.host.clock import now_rfc3339
from lab.model import VerifierCheck


def _sha256(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def verify(*, source: Path, backup: Path) -> VerifierCheck:
    source_digest, _ = _sha256(source)
    if not backup.is_file():
        return VerifierCheck(
            backup_exists=False,
            matches_source=False,
            backup_sha256=None,
            source_sha256=source_digest,
            backup_size=None,
            checked_at=now_rfc3339(),
        )
    backup_digest, size = _sha256(backup)
    return VerifierCheck(
        backup_exists=True,
        matches_source=backup_digest == source_digest,
        backup_sha256=backup_digest,
        source_sha256=source_digest,
        backup_size=size,
        checked_at=now_rfc3339(),
    )
