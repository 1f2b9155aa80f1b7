"""The independent backup check: what is on disk, against what the lab knows without the
client.

It shares no code path with the receiver's validation: it reads the saved backup from the
store as a reviewer would and hashes it itself, then compares it with

- the *fixture digest*, computed by the lab before the client started (never the source
  file on disk, which a client could rewrite: that file is hashed again only to record
  whether it changed), and
- the *receiver's own record* of what it committed (or pre-loaded) last: a file that
  appeared in the store without a commit was written outside the protocol.

    check = verify(backup=store / "backup.bin", fixture_sha256=digest, source=box / "source.bin",
                   receiver_digest=rx.saved_digest)
    check.verified      # file on disk, receiver's record and fixture digest all agree
"""

from __future__ import annotations

from pathlib import Path

from lab.host.clock import now_rfc3339
from lab.host.digest import sha256_file
from lab.model import VerifierCheck


def _digest_and_size(path: Path) -> tuple[str, int]:
    return sha256_file(path), path.stat().st_size


def verify(
    *, backup: Path | None, fixture_sha256: str, source: Path, receiver_digest: str | None
) -> VerifierCheck:
    try:
        source_unchanged = sha256_file(source) == fixture_sha256
    except OSError:
        source_unchanged = False
    if backup is None or not backup.is_file():
        return VerifierCheck(
            backup_exists=False,
            matches_source=False,
            backup_sha256=None,
            source_sha256=fixture_sha256,
            backup_size=None,
            checked_at=now_rfc3339(),
            source_unchanged=source_unchanged,
            receiver_digest=receiver_digest,
            # nothing on disk is consistent only with a receiver that committed nothing
            store_consistent=receiver_digest is None,
        )
    digest, size = _digest_and_size(backup)
    return VerifierCheck(
        backup_exists=True,
        matches_source=digest == fixture_sha256,
        backup_sha256=digest,
        source_sha256=fixture_sha256,
        backup_size=size,
        checked_at=now_rfc3339(),
        source_unchanged=source_unchanged,
        receiver_digest=receiver_digest,
        store_consistent=digest == receiver_digest,
    )
