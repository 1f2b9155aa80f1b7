"""Verify an evidence archive without extracting it (the sigstore convention: verification
*raises*; it never returns a flag a caller can forget to check).

    report = verify_archive(Path("artifacts/r1.tar.gz"), pubkey=Path("lab.pub"))
    # a bad archive raises VerificationError: str(error) is the first failure in one
    # sentence, error.report holds every check (expected and found) for the CLI to print

    report = inspect_archive(path, pubkey=None)     # every check, never raises for a bad archive
    for check in report.checks:
        print(check.status, check.name, check.expected, check.found)

The archive is read once, as a stream, every header checked before its data is read
(:mod:`lab.evidence.scan`); the checks are :mod:`lab.evidence.checks`; tampering being
caught is shown by :mod:`lab.evidence.selftest`.
"""

from __future__ import annotations

from pathlib import Path

from lab.evidence.checks import (
    EPHEMERAL_WARNING,
    INTEGRITY_ONLY_WARNING,
    Check,
    VerificationError,
    VerifyReport,
    checksum_checks,
    provenance_checks,
    signature_checks,
    structure_checks,
)
from lab.evidence.forms import other_form_checks
from lab.evidence.scan import Limits, scan_archive


def verify_archive(
    path: Path, *, pubkey: Path | None = None, limits: Limits | None = None
) -> VerifyReport:
    """Every check; raise :class:`VerificationError` (an ``ArchiveError``) when any failed.

    A ``pubkey`` that cannot be read raises :class:`~lab.errors.SigningError` (the user's
    input, not the archive, is at fault).
    """
    report = inspect_archive(path, pubkey=pubkey, limits=limits)
    if not report.ok:
        raise VerificationError(report)
    return report


def inspect_archive(
    path: Path, *, pubkey: Path | None = None, limits: Limits | None = None
) -> VerifyReport:
    """Run every check and collect the results; never raises for a bad archive (a bad
    ``pubkey`` still raises ``SigningError``)."""
    limits = limits or Limits()
    report = VerifyReport(archive=path.name)
    scan = scan_archive(path, limits)
    if scan.read_error is not None:
        report.add(
            "archive readable",
            False,
            "a complete gzip-compressed tar archive",
            scan.read_error,
            f"{path.name} cannot be read as a gzip-compressed tar archive: {scan.read_error}.",
        )
        return report
    report.add(
        "archive readable",
        True,
        "a complete gzip-compressed tar archive",
        f"{len(scan.members)} members",
    )
    files = structure_checks(report, scan, limits)
    if scan.limit_error is not None:
        return report  # the scan stopped early; the remaining checks would mislead
    listed = checksum_checks(report, scan, files)
    key = signature_checks(report, scan, pubkey)
    # after the signatures: a forged list fails there first
    other_form_checks(report, scan, key, listed)
    provenance_checks(report, scan, key, files)
    if report.ephemeral:
        report.warnings.append(EPHEMERAL_WARNING)
    return report


__all__ = [
    "EPHEMERAL_WARNING",
    "INTEGRITY_ONLY_WARNING",
    "Check",
    "Limits",
    "VerificationError",
    "VerifyReport",
    "inspect_archive",
    "verify_archive",
]
