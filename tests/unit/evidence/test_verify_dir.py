"""``lab verify DIR``: an unpacked run directory verified in place, nothing followed through a
symbolic link; and ``--json`` (one document on stdout, the table on stderr)."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest

from lab._cli import main
from lab.evidence.archive import CHECKSUMS, CHECKSUMS_GNU, CHECKSUMS_SIGNIFY, ArchiveInfo
from lab.evidence.keys import generate_keypair
from lab.evidence.signing import Signer
from lab.evidence.verify import VerificationError, inspect_archive, verify_archive
from tests.unit.evidence.test_verify import make_archive


@pytest.fixture
def good(tmp_path: Path) -> tuple[ArchiveInfo, Path]:
    paths = generate_keypair(tmp_path / "keys")
    return make_archive(tmp_path, Signer.from_file(paths.secret)), paths.public


@pytest.fixture
def unpacked(tmp_path: Path, good: tuple[ArchiveInfo, Path]) -> Path:
    extract = tmp_path / "extract"
    extract.mkdir()
    with tarfile.open(good[0].path, "r:gz") as tar:
        tar.extractall(extract, filter="data")
    return extract / "run-1"


def test_unpacked_directory_passes_the_same_checks(
    unpacked: Path, good: tuple[ArchiveInfo, Path]
) -> None:
    info, pub = good
    report = verify_archive(unpacked, pubkey=pub)
    from_archive = verify_archive(info.path, pubkey=pub)
    assert report.ok and report.run_id == "run-1" and report.authenticity_established
    assert report.checks[0].name == "directory readable"
    # the same checks, but the archive's own sidecars (.sha256, .sha256.sig beside it),
    # which a directory has none of
    inside = [c for c in from_archive.checks if not c.name.startswith("archive checksum")]
    assert len(inside) == len(from_archive.checks) - 2
    names = [c.name for c in report.checks]
    assert names[1:] == [c.name for c in inside][1:]
    assert [c.found for c in report.checks[4:]] == [c.found for c in inside[4:]]


def test_the_run_directory_itself_verifies(good: tuple[ArchiveInfo, Path]) -> None:
    info, pub = good
    assert verify_archive(info.run_dir, pubkey=pub).ok
    # and by a relative path, from inside it
    cwd = Path.cwd()
    os.chdir(info.run_dir)
    try:
        assert verify_archive(Path("."), pubkey=pub).run_id == "run-1"
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("target", ["results.json", "/etc/hostname"])
def test_a_symlink_member_is_refused_not_followed(
    unpacked: Path, good: tuple[ArchiveInfo, Path], target: str
) -> None:
    """results.json replaced by a link to a file with the same bytes: still refused."""
    copy = unpacked.parent / "results-copy.json"
    copy.write_bytes((unpacked / "results.json").read_bytes())
    (unpacked / "results.json").unlink()
    (unpacked / "results.json").symlink_to(copy if target == "results.json" else target)
    with pytest.raises(VerificationError) as failure:
        verify_archive(unpacked, pubkey=good[1])
    message = str(failure.value)
    assert "run-1/results.json (symbolic link) is not a regular file or directory" in message
    assert "\n" not in message and message.endswith(".")


def test_a_symlinked_directory_is_refused(unpacked: Path, good: tuple[ArchiveInfo, Path]) -> None:
    moved = unpacked.parent / "baseline-elsewhere"
    (unpacked / "baseline").rename(moved)
    (unpacked / "baseline").symlink_to(moved, target_is_directory=True)
    report = inspect_archive(unpacked, pubkey=good[1])
    failure = report.first_failure
    assert failure is not None and failure.name == "member types"
    assert "run-1/baseline (symbolic link)" in (failure.message or "")
    link = unpacked.parent / "link-to-run"
    link.symlink_to(unpacked.parent / "baseline-elsewhere", target_is_directory=True)
    report = inspect_archive(link, pubkey=good[1])
    assert report.first_failure is not None
    assert "symbolic link, which verification does not follow" in (
        report.first_failure.message or ""
    )


def test_a_fifo_is_refused_without_blocking(unpacked: Path, good: tuple[ArchiveInfo, Path]) -> None:
    os.mkfifo(unpacked / "pipe")
    report = inspect_archive(unpacked, pubkey=good[1])
    assert report.first_failure is not None
    assert "run-1/pipe (FIFO)" in (report.first_failure.message or "")


@pytest.mark.parametrize(
    ("member", "needle"),
    [
        ("report.md", "run-1/report.md does not match SHA256SUMS"),
        (CHECKSUMS_SIGNIFY, "SHA256SUMS.signify does not verify"),
        (CHECKSUMS_GNU, "run-1/SHA256SUMS.gnu does not match SHA256SUMS"),
        # its last line: blamed on the list itself, whose signature is checked first
        (CHECKSUMS, "SHA256SUMS.sig does not verify"),
    ],
)
def test_tampered_directory_is_refused_in_one_sentence(
    unpacked: Path, good: tuple[ArchiveInfo, Path], member: str, needle: str
) -> None:
    path = unpacked / member
    data = bytearray(path.read_bytes())
    data[-2] = ord("0") if data[-2] != ord("0") else ord("1")  # still a hex digit
    path.write_bytes(bytes(data))
    with pytest.raises(VerificationError) as failure:
        verify_archive(unpacked, pubkey=good[1])
    assert needle in str(failure.value), str(failure.value)


def test_an_extra_file_in_the_directory_is_refused(
    unpacked: Path, good: tuple[ArchiveInfo, Path]
) -> None:
    (unpacked / "notes.txt").write_text("added after signing\n")
    with pytest.raises(VerificationError, match=r"run-1/notes\.txt is in the archive but not"):
        verify_archive(unpacked, pubkey=good[1])


# --- --json ---------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["archive", "directory"])
def test_verify_json_carries_the_verdict(
    unpacked: Path,
    good: tuple[ArchiveInfo, Path],
    capsys: pytest.CaptureFixture[str],
    form: str,
) -> None:
    info, pub = good
    target = info.path if form == "archive" else unpacked
    assert main(["verify", str(target), "--pubkey", str(pub), "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["ok"] is True and data["authenticity_established"] is True
    assert data["key_id"] == info.key_id and data["run_id"] == "run-1"
    assert all(check["status"] == "PASS" for check in data["checks"])
    assert "Verification of" in err and f"key {info.key_id}" in err


def test_verify_json_of_a_tampered_directory(
    unpacked: Path, good: tuple[ArchiveInfo, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (unpacked / "report.md").write_text("changed\n")
    assert main(["verify", str(unpacked), "--pubkey", str(good[1]), "--json"]) == 1
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["ok"] is False
    failed = [c for c in data["checks"] if c["status"] == "FAIL"]
    assert failed[0]["name"] == "member digests"
    assert "report.md does not match SHA256SUMS" in failed[0]["message"]
    assert err.rstrip().splitlines()[-1].startswith("error: ")


def test_verify_selftest_json(
    good: tuple[ArchiveInfo, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    info, pub = good
    assert main(["verify", str(info.path), "--pubkey", str(pub), "--selftest", "--json"]) == 0
    out, _ = capsys.readouterr()
    data = json.loads(out)
    assert data["ok"] is True and len(data["cases"]) == 7


def test_selftest_of_a_directory_is_one_sentence(
    unpacked: Path, good: tuple[ArchiveInfo, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(unpacked), "--selftest"]) == 1
    _, err = capsys.readouterr()
    assert "--selftest tampers with copies of an archive file" in err


def test_forms_an_earlier_lab_never_wrote_pass_only_when_the_signed_list_omits_them(
    good: tuple[ArchiveInfo, Path],
) -> None:
    from lab.evidence.archive import PUBKEY_PEM
    from lab.evidence.checks import VerifyReport
    from lab.evidence.forms import EARLIER, other_form_checks
    from lab.evidence.keys import PublicKey
    from lab.evidence.scan import Scan

    key = PublicKey.parse(good[1].read_bytes(), what="lab.pub")
    earlier = VerifyReport(archive="old.tar.gz", run_id="run-0")
    other_form_checks(earlier, Scan(), key, {"results.json": "0" * 64})
    assert earlier.ok and {c.found for c in earlier.checks} == {EARLIER}
    assert len(earlier.checks) == 3
    # listed in the signed SHA256SUMS but gone: removed, so refused
    removed = VerifyReport(archive="new.tar.gz", run_id="run-1")
    listed = {"results.json": "0" * 64, CHECKSUMS_GNU: "1" * 64, PUBKEY_PEM: "2" * 64}
    other_form_checks(removed, Scan(), key, listed)
    assert not removed.ok
    failed = {c.name for c in removed.checks if not c.passed}
    assert failed == {PUBKEY_PEM, CHECKSUMS_GNU, CHECKSUMS_SIGNIFY}
