"""Verification: a good archive passes; every kind of tampering is rejected in one sentence."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from lab._cli import build_parser, cmd_verify, main
from lab.errors import ArchiveError, SigningError
from lab.evidence.archive import (
    CHECKSUMS,
    CHECKSUMS_GNU,
    CHECKSUMS_SIG,
    CHECKSUMS_SIGNIFY,
    GENERATED,
    PROVENANCE,
    PUBKEY_PEM,
    UNLISTED,
    ArchiveInfo,
    build_tarball,
    render_checksums,
    render_gnu_checksums,
    write_archive,
)
from lab.evidence.keys import generate_keypair
from lab.evidence.provenance import ProvenanceInputs
from lab.evidence.selftest import require_expected, selftest
from lab.evidence.signing import Signer
from lab.evidence.verify import (
    EPHEMERAL_WARNING,
    INTEGRITY_ONLY_WARNING,
    Limits,
    VerificationError,
    VerifyReport,
    inspect_archive,
    verify_archive,
)

EPOCH = 1_764_432_000
INPUTS = ProvenanceInputs(
    run_id="run-1",
    started_on="2025-11-29T16:00:00Z",
    finished_on="2025-11-29T16:02:00Z",
    scenarios=["baseline"],
    options={"collector": "none"},
)
#: the run's own files; write_archive adds the signing files
RUN_FILES = {
    "results.json": b'{"$schema": "results.schema.json", "schema_version": 1}',
    "results.schema.json": b'{"type": "object"}',
    "report.md": b"# Report\n",
    "baseline/r1/none/inv1/client.stdout": b'{"event": "complete", "status": "ok"}\n',
    "baseline/r1/none/capture.pcap": bytes(range(256)) * 8,
}
ALL_FILES = sorted([*RUN_FILES, *GENERATED])

Entry = tuple[tarfile.TarInfo, bytes | None]


def make_archive(root: Path, signer: Signer) -> ArchiveInfo:
    run_dir = root / "artifacts" / "run-1"
    for rel, data in RUN_FILES.items():
        (run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / rel).write_bytes(data)
    return write_archive(run_dir, signer=signer, provenance_inputs=INPUTS, epoch=EPOCH)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Signer, Path]:
    paths = generate_keypair(tmp_path / "keys")
    return Signer.from_file(paths.secret), paths.public


@pytest.fixture
def good(tmp_path: Path, keys: tuple[Signer, Path]) -> ArchiveInfo:
    return make_archive(tmp_path, keys[0])


@pytest.fixture
def pubkey(keys: tuple[Signer, Path]) -> Path:
    return keys[1]


def read_entries(path: Path) -> list[Entry]:
    entries: list[Entry] = []
    with tarfile.open(path, "r:gz") as tar:
        for info in tar.getmembers():
            fh = tar.extractfile(info) if info.isreg() else None
            entries.append((info, fh.read() if fh is not None else None))
    return entries


def write_entries(entries: list[Entry], dest: Path) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    dest.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return dest


def tampered(good: ArchiveInfo, tmp: Path, change: Callable[[list[Entry]], None]) -> Path:
    entries = read_entries(good.path)
    change(entries)
    return write_entries(entries, tmp / "tampered.tar.gz")


def rel(info: tarfile.TarInfo) -> str:
    return info.name.split("/", 1)[1] if "/" in info.name else ""


def find(entries: list[Entry], name: str) -> int:
    return next(i for i, (info, _) in enumerate(entries) if rel(info) == name)


def file_info(name: str, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, EPOCH
    return info


def assert_rejected(path: Path, pubkey: Path | None, *needles: str, **kw: Limits) -> str:
    report = inspect_archive(path, pubkey=pubkey, **kw)
    assert not report.ok and report.exit_code == 1
    with pytest.raises(VerificationError) as excinfo:
        verify_archive(path, pubkey=pubkey, **kw)
    # an ArchiveError (exit status 1) that carries every check for the CLI to print
    assert isinstance(excinfo.value, ArchiveError) and excinfo.value.exit_code == 1
    assert excinfo.value.report.to_dict() == report.to_dict()
    message = str(excinfo.value)
    assert "\n" not in message and message.endswith("."), message
    for needle in needles:
        assert needle in message, message
    failure = report.first_failure
    assert failure is not None and failure.status == "FAIL" and failure.message == message
    return message


# --- the good archive -----------------------------------------------------------------------
def test_good_archive_passes_every_check(good: ArchiveInfo, pubkey: Path) -> None:
    report = verify_archive(good.path, pubkey=pubkey)
    assert report.ok and report.exit_code == 0
    assert [c.status for c in report.checks] == ["PASS"] * len(report.checks)
    assert {c.name for c in report.checks} >= {
        "archive readable",
        "member types",
        "member names",
        "size limits",
        "SHA256SUMS",
        "member set",
        "member digests",
        "embedded public key",
        "lab.pub.pem",
        "SHA256SUMS signature",
        "SHA256SUMS.signify",
        "SHA256SUMS.gnu",
        "provenance signature",
        "provenance subjects",
        "provenance build type",
        "results schema",
        "run id",
    }
    assert report.run_id == "run-1"
    assert report.ephemeral is False and report.trusted_key
    assert report.authenticity_established
    assert report.warnings == []
    as_dict = report.to_dict()
    assert json.loads(json.dumps(as_dict))["checks"][0] == {
        "name": "archive readable",
        "status": "PASS",
        "expected": "a complete gzip-compressed tar archive",
        "found": "17 members",
        "message": None,
    }


def test_pem_public_key_is_accepted(good: ArchiveInfo, pubkey: Path) -> None:
    pem = pubkey.with_name("lab.pub.pem")
    assert inspect_archive(good.path, pubkey=pem).ok


def test_without_pubkey_integrity_only(good: ArchiveInfo) -> None:
    report = inspect_archive(good.path)
    assert report.ok
    assert not report.authenticity_established
    assert report.warnings == [INTEGRITY_ONLY_WARNING]
    assert report.key_source == "embedded lab.pub"


def test_ephemeral_archive_says_authenticity_not_established(tmp_path: Path) -> None:
    signer = Signer.ephemeral()
    info = make_archive(tmp_path, signer)
    pub = tmp_path / "eph.pub"
    pub.write_text(signer.public_key_file())
    report = inspect_archive(info.path, pubkey=pub)
    assert report.ok and report.ephemeral is True
    assert not report.authenticity_established
    assert EPHEMERAL_WARNING in report.warnings


def test_bad_pubkey_argument_raises_signing_error(good: ArchiveInfo, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pub"
    bad.write_text("not a key\n")
    with pytest.raises(SigningError, match=r"bad\.pub"):
        inspect_archive(good.path, pubkey=bad)
    with pytest.raises(SigningError, match="cannot read"):
        inspect_archive(good.path, pubkey=tmp_path / "missing.pub")


# --- the tamper matrix ----------------------------------------------------------------------
@pytest.mark.parametrize("member", ALL_FILES)
@pytest.mark.parametrize("trusted", [True, False], ids=["pubkey", "embedded"])
def test_flipped_byte_in_each_member(
    good: ArchiveInfo, pubkey: Path, tmp_path: Path, member: str, trusted: bool
) -> None:
    def flip(entries: list[Entry]) -> None:
        i = find(entries, member)
        info, data = entries[i]
        assert data
        mid = len(data) // 2
        entries[i] = (info, data[:mid] + bytes([data[mid] ^ 0x01]) + data[mid + 1 :])

    path = tampered(good, tmp_path, flip)
    assert_rejected(path, pubkey if trusted else None)


@pytest.mark.parametrize("member", ALL_FILES)
def test_deleted_member(good: ArchiveInfo, pubkey: Path, tmp_path: Path, member: str) -> None:
    path = tampered(good, tmp_path, lambda entries: entries.pop(find(entries, member)) and None)
    message = assert_rejected(path, pubkey)
    assert member.split("/")[-1] in message or CHECKSUMS in message


def test_added_member(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    def add(entries: list[Entry]) -> None:
        entries.append((file_info("run-1/baseline/extra.txt"), b"planted\n"))

    path = tampered(good, tmp_path, add)
    assert_rejected(path, pubkey, "run-1/baseline/extra.txt", "not in SHA256SUMS")


def test_added_empty_directory(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    def add(entries: list[Entry]) -> None:
        info = tarfile.TarInfo("run-1/hidden")
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        entries.append((info, None))

    path = tampered(good, tmp_path, add)
    assert_rejected(path, pubkey, "run-1/hidden", "holds no listed file")


def test_renamed_member(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    def rename(entries: list[Entry]) -> None:
        entries[find(entries, "report.md")][0].name = "run-1/report.txt"

    path = tampered(good, tmp_path, rename)
    assert_rejected(path, pubkey, "report.md", "missing")


def test_replaced_sha256sums(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    """Change a member and rewrite SHA256SUMS to match: only the signature notices."""

    def replace(entries: list[Entry]) -> None:
        i = find(entries, "results.json")
        entries[i] = (entries[i][0], b'{"schema_version": 1, "forged": true}')
        digests = {
            rel(info): hashlib.sha256(data).hexdigest()
            for info, data in entries
            if data is not None and rel(info) not in UNLISTED
        }
        entries[find(entries, CHECKSUMS)] = (
            entries[find(entries, CHECKSUMS)][0],
            render_checksums(digests).encode(),
        )

    path = tampered(good, tmp_path, replace)
    assert_rejected(path, pubkey, "SHA256SUMS.sig", "does not verify")
    assert_rejected(path, None, "SHA256SUMS.sig", "does not verify")


def test_signature_from_another_key(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    def resign(entries: list[Entry]) -> None:
        sums = entries[find(entries, CHECKSUMS)][1] or b""
        other = Signer.ephemeral().sign_detached(sums, file_name=CHECKSUMS)
        entries[find(entries, CHECKSUMS_SIG)] = (
            entries[find(entries, CHECKSUMS_SIG)][0],
            other.encode(),
        )

    path = tampered(good, tmp_path, resign)
    assert_rejected(path, pubkey, "SHA256SUMS.sig", "was made by key", "not by the expected key")
    assert_rejected(path, None, "SHA256SUMS.sig", "was made by key")


def test_embedded_signature_over_another_list(
    good: ArchiveInfo, pubkey: Path, tmp_path: Path, keys: tuple[Signer, Path]
) -> None:
    """SHA256SUMS.signify signed by the right key, but embedding a list other than SHA256SUMS
    (what signify -C would then check): refused in one sentence naming both files."""

    def swap(entries: list[Entry]) -> None:
        i = find(entries, CHECKSUMS_SIGNIFY)
        entries[i] = (entries[i][0], keys[0].sign_embedded(b"SHA256 (x) = " + b"0" * 64 + b"\n"))

    path = tampered(good, tmp_path, swap)
    message = assert_rejected(path, pubkey, "SHA256SUMS.signify embeds a list that differs")
    assert message.endswith("run-1/SHA256SUMS.")


def test_embedded_signature_by_another_key(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    def resign(entries: list[Entry]) -> None:
        i = find(entries, CHECKSUMS_SIGNIFY)
        sums = entries[find(entries, CHECKSUMS)][1] or b""
        entries[i] = (entries[i][0], Signer.ephemeral().sign_embedded(sums))

    path = tampered(good, tmp_path, resign)
    assert_rejected(path, pubkey, "SHA256SUMS.signify was made by key", "not by the expected key")


def test_pem_key_of_another_key(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    """lab.pub.pem swapped for another key (and SHA256SUMS not updated): the digest check and
    the key comparison both say so; the comparison names both key ids."""

    def swap(entries: list[Entry]) -> None:
        i = find(entries, PUBKEY_PEM)
        entries[i] = (entries[i][0], Signer.ephemeral().public_key.to_pem())

    report = inspect_archive(tampered(good, tmp_path, swap), pubkey=pubkey)
    pem = next(c for c in report.checks if c.name == PUBKEY_PEM)
    assert not pem.passed and pem.message is not None
    assert "run-1/lab.pub.pem holds key" in pem.message and "not the key" in pem.message
    assert pem.message.count(".") >= 1 and "\n" not in pem.message


def test_gnu_list_that_disagrees_with_sha256sums(
    good: ArchiveInfo, pubkey: Path, tmp_path: Path, keys: tuple[Signer, Path]
) -> None:
    """A signer whose GNU list says something else than SHA256SUMS (signed, digests right):
    busybox would check other digests than signify, so verification refuses it."""
    signer = keys[0]
    run_dir = good.run_dir
    listed = dict(
        line.split("  ", 1)[::-1] for line in (run_dir / CHECKSUMS_GNU).read_text().splitlines()
    )
    listed["report.md"] = "0" * 64
    (run_dir / CHECKSUMS_GNU).write_text(render_gnu_checksums(listed))
    sums = (run_dir / CHECKSUMS).read_text().splitlines(keepends=True)
    gnu_digest = hashlib.sha256((run_dir / CHECKSUMS_GNU).read_bytes()).hexdigest()
    sums = [
        f"SHA256 ({CHECKSUMS_GNU}) = {gnu_digest}\n" if f"({CHECKSUMS_GNU})" in line else line
        for line in sums
    ]
    data = "".join(sums).encode()
    (run_dir / CHECKSUMS).write_bytes(data)
    (run_dir / CHECKSUMS_SIG).write_text(signer.sign_detached(data, file_name=CHECKSUMS))
    (run_dir / CHECKSUMS_SIGNIFY).write_bytes(signer.sign_embedded(data))
    path = tmp_path / "gnu.tar.gz"
    build_tarball(run_dir, path, epoch=EPOCH)
    message = assert_rejected(path, pubkey, "run-1/SHA256SUMS.gnu disagrees with run-1/SHA256SUMS")
    assert message.endswith("about report.md."), message


def test_archive_signed_by_someone_else(good: ArchiveInfo, tmp_path: Path) -> None:
    """A complete archive signed by another key: the given --pubkey rejects it."""
    other = make_archive(
        tmp_path / "other", Signer.from_file(generate_keypair(tmp_path / "o").secret)
    )
    their_pub = tmp_path / "keys" / "lab.pub"
    message = assert_rejected(other.path, their_pub, "not the public key given with --pubkey")
    assert "run-1/lab.pub" in message
    assert inspect_archive(other.path).ok  # without a trusted key, integrity only


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9])
def test_truncated_archive(
    good: ArchiveInfo, pubkey: Path, tmp_path: Path, fraction: float
) -> None:
    data = good.path.read_bytes()
    path = tmp_path / "cut.tar.gz"
    path.write_bytes(data[: int(len(data) * fraction)])
    assert_rejected(path, pubkey, "cannot be read as a gzip-compressed tar archive")


@pytest.mark.parametrize("cut", [1, 4, 8, 20])
def test_truncated_at_the_end(good: ArchiveInfo, pubkey: Path, tmp_path: Path, cut: int) -> None:
    """Cutting the gzip trailer (CRC and length) or the tar padding is caught too."""
    path = tmp_path / "cut.tar.gz"
    path.write_bytes(good.path.read_bytes()[:-cut])
    assert_rejected(path, pubkey, "cut short")


def test_missing_archive(tmp_path: Path, pubkey: Path) -> None:
    assert_rejected(tmp_path / "nope.tar.gz", pubkey, "nope.tar.gz", "does not exist")


def test_not_gzip(tmp_path: Path, pubkey: Path) -> None:
    path = tmp_path / "plain.tar.gz"
    path.write_bytes(b"this is not an archive at all" * 20)
    assert_rejected(path, pubkey, "not gzip data")


def test_data_after_the_archive(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    with gzip.open(good.path) as fh:
        tar_bytes = fh.read()
    path = tmp_path / "trailing.tar.gz"
    path.write_bytes(gzip.compress(tar_bytes + b"hidden payload", mtime=0))
    assert_rejected(path, pubkey, "data after the end")


def special(name: str, kind: bytes, **attrs: object) -> Entry:
    info = file_info(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return (info, None)


@pytest.mark.parametrize(
    ("entry", "needles"),
    [
        ((file_info("/etc/evil"), b"x"), ("'/etc/evil'", "absolute")),
        ((file_info("run-1/../evil"), b"x"), ("'..'",)),
        ((file_info("run-1/a\\b"), b"x"), ("backslash",)),
        ((file_info("other-top/x"), b"x"), ("top directories",)),
        (special("run-1/link", tarfile.SYMTYPE, linkname="/etc/passwd"), ("symbolic link",)),
        (special("run-1/hard", tarfile.LNKTYPE, linkname="run-1/report.md"), ("hard link",)),
        (special("run-1/dev", tarfile.CHRTYPE, devmajor=1, devminor=3), ("character device",)),
        (special("run-1/blk", tarfile.BLKTYPE, devmajor=8, devminor=0), ("block device",)),
        (special("run-1/fifo", tarfile.FIFOTYPE), ("FIFO",)),
        ((file_info("run-1/report.md"), b"second copy\n"), ("appears more than once",)),
    ],
    ids=[
        "absolute",
        "dotdot",
        "backslash",
        "two-tops",
        "symlink",
        "hardlink",
        "chardev",
        "blockdev",
        "fifo",
        "duplicate",
    ],
)
def test_unsafe_members(
    good: ArchiveInfo, pubkey: Path, tmp_path: Path, entry: Entry, needles: tuple[str, ...]
) -> None:
    path = tampered(good, tmp_path, lambda entries: entries.append(entry))
    message = assert_rejected(path, pubkey, *needles)
    assert message.startswith("tampered.tar.gz: ")


def test_duplicate_of_a_member_cannot_shadow_it(
    good: ArchiveInfo, pubkey: Path, tmp_path: Path
) -> None:
    """A second results.json (which tar would extract over the first) is refused even when the
    first copy is the genuine one."""

    def duplicate(entries: list[Entry]) -> None:
        info, _ = entries[find(entries, "results.json")]
        entries.append((file_info(info.name), b"{}"))

    path = tampered(good, tmp_path, duplicate)
    report = inspect_archive(path, pubkey=pubkey)
    names = {c.name: c for c in report.checks}
    assert not names["member names"].passed
    assert "results.json" in names["member names"].found


def test_oversized_member(good: ArchiveInfo, pubkey: Path) -> None:
    limits = Limits(max_member_size=1024)
    message = assert_rejected(
        good.path, pubkey, "capture.pcap", "declares 2048 bytes", limits=limits
    )
    assert "archive bombs" in message
    report = inspect_archive(good.path, pubkey=pubkey, limits=limits)
    assert report.checks[-1].name == "size limits"  # nothing after the scan stopped


def test_too_many_members(good: ArchiveInfo, pubkey: Path) -> None:
    assert_rejected(good.path, pubkey, "more than 5 members", limits=Limits(max_members=5))


def test_total_size_limit(good: ArchiveInfo, pubkey: Path) -> None:
    assert_rejected(good.path, pubkey, "total more than 2500", limits=Limits(max_total_size=2500))


def test_gzip_bomb_is_stopped(tmp_path: Path, pubkey: Path) -> None:
    """A 3 MiB member compressed to a few KiB is refused from its header, unread."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        big = b"\0" * (3 * 1024 * 1024)
        tar.addfile(file_info("run-1/zeros", len(big)), io.BytesIO(big))
    path = tmp_path / "bomb.tar.gz"
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    assert path.stat().st_size < 20_000
    assert_rejected(path, pubkey, "declares", limits=Limits(max_member_size=1024 * 1024))


def test_header_bomb_is_stopped_by_the_stream_cap(tmp_path: Path, pubkey: Path) -> None:
    """A huge PAX record is not a member size, so only the decompressed-stream cap sees it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = file_info("run-1/x", 1)
        info.pax_headers = {"comment": "A" * (3 * 1024 * 1024)}
        tar.addfile(info, io.BytesIO(b"x"))
    path = tmp_path / "pax-bomb.tar.gz"
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    limits = Limits(
        max_total_size=1024 * 1024, max_header_bytes=1024 * 1024, max_extended_header=8 << 20
    )
    assert_rejected(path, pubkey, "expands to more than 2097152 bytes", limits=limits)
    # Under the default limits the same archive is refused from the PAX header itself.
    assert_rejected(path, pubkey, "extended header", "declares 3145745 bytes (limit 65536)")


def test_provenance_subject_mismatch_is_reported(
    good: ArchiveInfo, tmp_path: Path, keys: tuple[Signer, Path]
) -> None:
    """Even with a valid SHA256SUMS signature, the provenance must name exactly the members:
    a signer who re-packs with a stale provenance is caught."""
    signer, pub = keys
    run_dir = good.run_dir
    (run_dir / "report.md").write_text("# Report, edited after the provenance\n")
    stale = (run_dir / PROVENANCE).read_bytes()
    digests = {
        p.relative_to(run_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in run_dir.rglob("*")
        if p.is_file() and p.name not in UNLISTED | {CHECKSUMS_GNU}
    }
    (run_dir / CHECKSUMS_GNU).write_text(render_gnu_checksums(digests))
    digests[CHECKSUMS_GNU] = hashlib.sha256((run_dir / CHECKSUMS_GNU).read_bytes()).hexdigest()
    sums = render_checksums(digests).encode()
    (run_dir / CHECKSUMS).write_bytes(sums)
    (run_dir / CHECKSUMS_SIG).write_text(signer.sign_detached(sums, file_name=CHECKSUMS))
    (run_dir / CHECKSUMS_SIGNIFY).write_bytes(signer.sign_embedded(sums))
    assert (run_dir / PROVENANCE).read_bytes() == stale
    path = tmp_path / "restamped.tar.gz"
    build_tarball(run_dir, path, epoch=EPOCH)
    message = assert_rejected(path, pub, "report.md", "provenance digest")
    assert "restamped.tar.gz" in message


# --- report and self-test -------------------------------------------------------------------
def test_report_collects_every_failure(good: ArchiveInfo, pubkey: Path, tmp_path: Path) -> None:
    def damage(entries: list[Entry]) -> None:
        i = find(entries, "report.md")
        entries[i] = (entries[i][0], b"changed\n")
        entries.append((file_info("run-1/new.txt"), b"new\n"))

    report: VerifyReport = inspect_archive(tampered(good, tmp_path, damage), pubkey=pubkey)
    failed = {c.name for c in report.checks if not c.passed}
    assert failed == {"member set", "member digests", "provenance subjects"}
    digests = next(c for c in report.checks if c.name == "member digests")
    assert "report.md" in digests.found and digests.expected


def test_selftest_with_trusted_key_rejects_every_tampering(good: ArchiveInfo, pubkey: Path) -> None:
    cases = selftest(good.path, pubkey)
    assert [c.name for c in cases] == [
        "untouched",
        "flip-byte",
        "delete-member",
        "add-member",
        "replace-sha256sums",
        "resign-other-key",
        "truncated",
    ]
    assert all(case.ok for case in cases), [c.to_dict() for c in cases]
    assert cases[0].outcome == "accepted"
    assert all(c.outcome == "rejected" for c in cases[1:])
    assert "not the public key given" in cases[5].reason


def test_selftest_without_key_shows_the_limit(good: ArchiveInfo) -> None:
    cases = {c.name: c for c in selftest(good.path, None)}
    assert all(c.ok for c in cases.values())
    resign = cases["resign-other-key"]
    assert resign.expected == "accept" and resign.outcome == "accepted"
    assert "not who produced them" in resign.reason


def test_selftest_of_a_broken_archive_stops_at_once(tmp_path: Path, pubkey: Path) -> None:
    path = tmp_path / "broken.tar.gz"
    path.write_bytes(b"\x1f\x8b\x08\0\0\0\0\0\0\xff")
    cases = selftest(path, pubkey)
    assert len(cases) == 1 and cases[0].outcome == "rejected" and not cases[0].ok


# --- python -m lab verify ------------------------------------------------------------------
def _cli_verify(archive: Path, pubkey: Path | None, console: Console, *extra: str) -> int:
    argv = ["verify", str(archive), *(["--pubkey", str(pubkey)] if pubkey else []), *extra]
    return cmd_verify(build_parser().parse_args(argv), console)


def test_cli_prints_every_check(good: ArchiveInfo, pubkey: Path) -> None:
    console = Console(record=True, width=200)
    assert _cli_verify(good.path, pubkey, console) == 0
    text = console.export_text()
    assert (
        text.count("PASS") == 19
    )  # with the .sha256 and its .sig beside it and "FAIL" not in text
    assert "authenticity established for that key" in text
    assert "512 MiB each, 2 GiB in total" in text


def test_cli_prints_the_whole_table_then_raises_the_first_failure(
    good: ArchiveInfo, pubkey: Path, tmp_path: Path
) -> None:
    def damage(entries: list[Entry]) -> None:
        i = find(entries, "report.md")
        entries[i] = (entries[i][0], b"changed\n")

    console = Console(record=True, width=200)
    with pytest.raises(VerificationError, match=r"report\.md does not match SHA256SUMS"):
        _cli_verify(tampered(good, tmp_path, damage), pubkey, console)
    text = console.export_text()
    assert "FAIL" in text and text.count("PASS") == 15  # every check, not only the first failure
    assert "OK" not in text


def test_cli_exit_status_and_one_sentence(
    good: ArchiveInfo, pubkey: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def damage(entries: list[Entry]) -> None:
        i = find(entries, "report.md")
        entries[i] = (entries[i][0], b"changed\n")

    assert main(["verify", str(good.path), "--pubkey", str(pubkey)]) == 0
    capsys.readouterr()
    assert main(["verify", str(tampered(good, tmp_path, damage)), "--pubkey", str(pubkey)]) == 1
    out, err = capsys.readouterr()
    assert "FAIL" in out and "member digests" in out
    assert err.startswith("error: ") and "report.md does not match SHA256SUMS" in err


def test_cli_selftest(good: ArchiveInfo, pubkey: Path) -> None:
    console = Console(record=True, width=250)
    assert _cli_verify(good.path, pubkey, console, "--selftest") == 0
    text = console.export_text()
    assert text.count("rejected") == 6 and "all 7 cases behaved as expected" in text


def test_selftest_names_the_case_that_misbehaved(tmp_path: Path, pubkey: Path) -> None:
    path = tmp_path / "broken.tar.gz"
    path.write_bytes(b"\x1f\x8b\x08\0\0\0\0\0\0\xff")
    with pytest.raises(ArchiveError, match="the untouched archive does not verify"):
        require_expected(selftest(path, pubkey), path.name)
    console = Console(record=True, width=250)
    with pytest.raises(ArchiveError, match="untouched archive does not verify"):
        _cli_verify(path, pubkey, console, "--selftest")
    assert "Self-test on copies of broken.tar.gz" in console.export_text()


def test_console_names_the_key_id_and_the_standard_tools(good: ArchiveInfo) -> None:
    from lab._cli import print_archive

    console = Console(record=True, width=200)
    print_archive(good, console)
    text = console.export_text()
    assert f"Signed by key {good.key_id}" in text
    assert "signify-openbsd -C -p lab.pub -x SHA256SUMS.signify" in text
    assert "minisign -V -p lab.pub -m SHA256SUMS -x SHA256SUMS.sig" in text
    assert "sha256sum -c SHA256SUMS.gnu" in text and "busybox" in text
