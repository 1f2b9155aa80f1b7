"""``lab verify`` checks the ``.sha256`` and ``.sha256.sig`` beside an archive: intact
ones pass, a changed digest, a changed archive, a missing or foreign signature fail, and an
archive copied alone is still verified without them."""

from __future__ import annotations

import shutil
from pathlib import Path

from lab.evidence.archive import ArchiveInfo
from lab.evidence.keys import generate_keypair
from lab.evidence.signing import Signer
from lab.evidence.verify import inspect_archive
from tests.unit.evidence.test_verify import good, keys, make_archive, pubkey

__all__ = ["good", "keys", "pubkey"]  # the fixtures, shared with test_verify


def _sidecar(report_checks: list[object]) -> dict[str, bool]:
    return {c.name: c.passed for c in report_checks if c.name.startswith("archive checksum")}  # type: ignore[attr-defined]


def test_intact_sidecars_pass(good: ArchiveInfo, pubkey: Path) -> None:
    report = inspect_archive(good.path, pubkey=pubkey)
    assert report.ok
    assert _sidecar(report.checks) == {
        "archive checksum file": True,
        "archive checksum signature": True,
    }


def test_a_changed_checksum_or_archive_fails(good: ArchiveInfo, pubkey: Path) -> None:
    text = good.checksum_file.read_text()
    good.checksum_file.write_text(("0" * 64) + text[64:])
    report = inspect_archive(good.path, pubkey=pubkey)
    assert not report.ok
    found = _sidecar(report.checks)
    assert found["archive checksum file"] is False
    assert found["archive checksum signature"] is False  # the line it signed changed


def test_a_foreign_signature_fails(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    other = Signer.from_file(generate_keypair(tmp_path / "other").secret)
    elsewhere = make_archive(tmp_path / "x", other)
    shutil.copy(elsewhere.checksum_sig, good.checksum_sig)
    report = inspect_archive(good.path, pubkey=pubkey)
    assert _sidecar(report.checks)["archive checksum signature"] is False
    assert not report.ok


def test_missing_signature_fails_and_an_archive_alone_passes(
    good: ArchiveInfo, pubkey: Path, tmp_path: Path
) -> None:
    good.checksum_sig.unlink()
    report = inspect_archive(good.path, pubkey=pubkey)
    assert _sidecar(report.checks)["archive checksum signature"] is False
    alone = tmp_path / "alone" / good.path.name
    alone.parent.mkdir()
    shutil.copy(good.path, alone)
    report = inspect_archive(alone, pubkey=pubkey)
    assert report.ok and _sidecar(report.checks) == {}
