"""Verify an evidence archive without extracting it.

The archive is read once, as a stream, with every header checked *before* its data is read
(:mod:`lab.evidence.scan`); each check (:mod:`lab.evidence.checks`) is recorded with what
was expected and what was found; the strict API raises the first failure as one sentence.

    report = verify_archive(Path("artifacts/r1.tar.gz"), pubkey=Path("lab.pub"))
    for check in report.checks:
        print(check.status, check.name, check.expected, check.found)
    verify_archive_or_raise(path, pubkey)         # ArchiveError on the first failure

Tampering being caught is shown by :mod:`lab.evidence.selftest`.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from lab.errors import ArchiveError
from lab.evidence.checks import (
    EPHEMERAL_WARNING,
    INTEGRITY_ONLY_WARNING,
    Check,
    VerifyReport,
    checksum_checks,
    provenance_checks,
    signature_checks,
    structure_checks,
)
from lab.evidence.scan import Limits, scan_archive


def verify_archive(
    path: Path, pubkey: Path | None = None, *, limits: Limits | None = None
) -> VerifyReport:
    """Run every check and collect the results; never raises for a bad archive.

    A ``pubkey`` that cannot be read raises :class:`SigningError` (the user's input, not the
    archive, is at fault).
    """
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
    checksum_checks(report, scan, files)
    key = signature_checks(report, scan, pubkey)
    provenance_checks(report, scan, key, files)
    if report.ephemeral:
        report.warnings.append(EPHEMERAL_WARNING)
    return report


def verify_archive_or_raise(
    path: Path, pubkey: Path | None = None, *, limits: Limits | None = None
) -> VerifyReport:
    """Like :func:`verify_archive`, but raise :class:`ArchiveError` on the first failure."""
    report = verify_archive(path, pubkey, limits=limits)
    failure = report.first_failure
    if failure is not None:
        raise ArchiveError(failure.message or f"{path.name}: {failure.name} failed.")
    return report


# Drawing only: every figure comes from the report or the cases above.
def verify_main(archive: Path, pubkey: Path | None, console: Console) -> int:
    """Print every check as a table, then the warnings; raise the first failure."""
    report = verify_archive(archive, pubkey)
    table = Table(title=f"Verification of {archive.name}", title_justify="left")
    for column in ("check", "status", "expected", "found"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        colour = "green" if check.passed else "red"
        table.add_row(check.name, f"[{colour}]{check.status}[/]", check.expected, check.found)
    console.print(table)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    failure = report.first_failure
    if failure is not None:
        raise ArchiveError(failure.message or f"{archive.name}: {failure.name} failed.")
    verdict = (
        "authenticity established for that key"
        if report.authenticity_established
        else "integrity verified; authenticity not established"
    )
    console.print(
        f"[green]OK[/]: {archive.name}, run {report.run_id}, key {report.key_id} "
        f"({report.key_source}): {verdict}.",
        soft_wrap=True,
    )
    return 0


def selftest_main(archive: Path, pubkey: Path | None, console: Console) -> int:
    """Print each tampered copy and whether verification caught it; 0 when all behaved."""
    from lab.evidence.selftest import selftest

    cases = selftest(archive, pubkey)
    table = Table(title=f"Self-test on copies of {archive.name}", title_justify="left")
    for column in ("case", "tampering", "expected", "outcome", "reason"):
        table.add_column(column, overflow="fold")
    for case in cases:
        colour = "green" if case.ok else "red"
        table.add_row(
            case.name, case.tampering, case.expected, f"[{colour}]{case.outcome}[/]", case.reason
        )
    console.print(table)
    bad = [case for case in cases if not case.ok]
    if bad:
        case = bad[0]
        if case.name == "untouched":
            raise ArchiveError(
                f"self-test of {archive.name}: the untouched archive does not verify: {case.reason}"
            )
        raise ArchiveError(
            f"self-test of {archive.name}: the '{case.name}' copy was {case.outcome}, not "
            f"{case.expected}ed; verification said: {case.reason}"
        )
    console.print(f"[green]OK[/]: all {len(cases)} cases behaved as expected.")
    return 0


__all__ = [
    "EPHEMERAL_WARNING",
    "INTEGRITY_ONLY_WARNING",
    "Check",
    "Limits",
    "VerifyReport",
    "selftest_main",
    "verify_archive",
    "verify_archive_or_raise",
    "verify_main",
]
