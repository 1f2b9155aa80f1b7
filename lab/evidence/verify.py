"""Verify an evidence archive without extracting it (the sigstore convention: verification
*raises*; it never returns a flag a caller can forget to check).

    report = verify_archive(Path("artifacts/r1.tar.gz"), pubkey=Path("lab.pub"))
    # a bad archive raises VerificationError: str(error) is the first failure in one
    # sentence, error.report holds every check (expected and found) for the CLI to print

    report = inspect_archive(path, pubkey=None)     # every check, never raises for a bad archive
    report, read = verify_reading(path, {"results.json"})   # and that member's verified bytes
    for check in report.checks:
        print(check.status, check.name, check.expected, check.found)

The archive is read once, as a stream, every header checked before its data is read
(:mod:`lab.evidence.scan`); a directory (``tar xzf`` of one) is read in place, without
following any symbolic link, and gets the same checks. The checks are
:mod:`lab.evidence.checks` and :mod:`lab.evidence.forms`; tampering being caught is shown by
:mod:`lab.evidence.selftest`.
"""

from __future__ import annotations

from collections.abc import Collection
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
from lab.evidence.forms import other_form_checks, results_schema_check
from lab.evidence.scan import Limits, Scan, scan_archive, scan_directory
from lab.evidence.sidecar import sidecar_checks


def verify_archive(
    path: Path, *, pubkey: Path | None = None, limits: Limits | None = None
) -> VerifyReport:
    """Every check of an archive, or of an unpacked run directory in place; raise
    :class:`VerificationError` (an ``ArchiveError``) when any failed.

    A ``pubkey`` that cannot be read raises :class:`~lab.errors.SigningError` (the user's
    input, not the archive, is at fault).
    """
    report, _ = verify_reading(path, (), pubkey=pubkey, limits=limits)
    return report


def verify_reading(
    path: Path,
    names: Collection[str],
    *,
    pubkey: Path | None = None,
    limits: Limits | None = None,
) -> tuple[VerifyReport, dict[str, bytes]]:
    """:func:`verify_archive`, and the bytes of the members ``names`` (each under the
    archive's top directory, within ``limits.max_read_size``; absent from the dict when the
    archive has no such file): the bytes the checks hashed, read in the same pass, so what
    a caller takes is what was verified, and the archive is read once. A directory's files
    are not read (its dict is empty)."""
    report, scan = _inspect(path, pubkey, limits or Limits(), frozenset(names))
    if not report.ok:
        raise VerificationError(report)
    return report, {} if scan is None else scan.read


def inspect_archive(
    path: Path, *, pubkey: Path | None = None, limits: Limits | None = None
) -> VerifyReport:
    """Run every check and collect the results; never raises for a bad archive (a bad
    ``pubkey`` still raises ``SigningError``)."""
    return _inspect(path, pubkey, limits or Limits(), frozenset())[0]


def _inspect(
    path: Path, pubkey: Path | None, limits: Limits, read: frozenset[str]
) -> tuple[VerifyReport, Scan | None]:
    directory = path.is_dir()  # a link to a directory too: scan_directory refuses it
    report = VerifyReport(archive=path.name or str(path))
    if directory:
        scan = scan_directory(path, limits)
        check, whole = "directory readable", "an unpacked run directory, no symbolic link followed"
    else:
        scan = scan_archive(path, limits, read)
        check, whole = "archive readable", "a complete gzip-compressed tar archive"
    if scan.read_error is not None:
        what = "an unpacked run directory" if directory else "a gzip-compressed tar archive"
        why = f"{report.archive} cannot be read as {what}: {scan.read_error}."
        report.add(check, False, whole, scan.read_error, why)
        return report, None
    report.add(check, True, whole, f"{len(scan.members)} members")
    files = structure_checks(report, scan, limits)
    if scan.limit_error is not None:
        return report, None  # the scan stopped early; the remaining checks would mislead
    # the signature over SHA256SUMS before anything is parsed: a forged list fails there
    # first, and is blamed, rather than the member it would make look changed
    key = signature_checks(report, scan, pubkey)
    listed = checksum_checks(report, scan, files)
    results_schema_check(report, files, listed)
    other_form_checks(report, scan, key, listed)
    provenance_checks(report, scan, key, files, listed)
    if not directory:
        sidecar_checks(report, path, key)  # <archive>.sha256 and .sha256.sig, when beside it
    if report.ephemeral:
        report.warnings.append(EPHEMERAL_WARNING)
    return report, None if directory else scan


__all__ = [
    "EPHEMERAL_WARNING",
    "INTEGRITY_ONLY_WARNING",
    "Check",
    "Limits",
    "VerificationError",
    "VerifyReport",
    "inspect_archive",
    "verify_archive",
    "verify_reading",
]
