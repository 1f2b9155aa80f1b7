"""The archive writer: determinism, normalised metadata, and the real coreutils/signify tools."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lab.errors import ArchiveError
from lab.evidence.archive import (
    CHECKSUMS,
    CHECKSUMS_GNU,
    CHECKSUMS_SIG,
    PROVENANCE,
    PUBKEY,
    UNLISTED,
    ArchiveInfo,
    archive_epoch,
    build_tarball,
    name_problem,
    parse_checksums,
    render_checksums,
    write_archive,
)
from lab.evidence.keys import generate_keypair
from lab.evidence.provenance import ProvenanceInputs, open_envelope
from lab.evidence.signing import Signer
from tests.conftest import require

EPOCH = 1_764_432_000  # 2025-11-29T16:00:00Z
INPUTS = ProvenanceInputs(
    run_id="run-1",
    started_on="2025-11-29T16:00:00Z",
    finished_on="2025-11-29T16:02:00Z",
    scenarios=["baseline"],
    options={"collector": "none"},
    git_commit="d9859bb" + "0" * 33,
    image_digest="sha256:" + "e" * 64,
    client_digest="f" * 64,
    client_path="native/build/backup-client",
)


def make_run(root: Path, name: str = "run-1") -> Path:
    """A small run directory with the shapes a real run has (nested, binary, executable)."""
    run_dir = root / "artifacts" / name
    (run_dir / "baseline" / "r1" / "none" / "inv1").mkdir(parents=True)
    (run_dir / "results.json").write_text(json.dumps({"schema_version": 1, "run_id": name}))
    (run_dir / "timeline.jsonl").write_text('{"t": 0}\n{"t": 1}\n')
    (run_dir / "baseline" / "r1" / "none" / "inv1" / "client.stdout").write_text(
        '{"event": "complete", "status": "ok"}\n'
    )
    (run_dir / "baseline" / "r1" / "none" / "capture.pcap").write_bytes(bytes(range(256)) * 40)
    tool = run_dir / "baseline" / "r1" / "none" / "replay.sh"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o700)
    (run_dir / "baseline" / "r1" / "none" / "receiver" / "store").mkdir(parents=True)
    long_dir = run_dir / ("d" * 60) / ("e" * 60)
    long_dir.mkdir(parents=True)
    (long_dir / "long name with spaces é.txt").write_text("pax needed\n")
    return run_dir


def archive(root: Path, signer: Signer, *, name: str = "run-1") -> ArchiveInfo:
    return write_archive(make_run(root, name), signer=signer, provenance_inputs=INPUTS, epoch=EPOCH)


@pytest.fixture
def signer(tmp_path: Path) -> Signer:
    paths = generate_keypair(tmp_path / "keys")
    return Signer.from_file(paths.secret)


@pytest.fixture(autouse=True)
def no_source_date_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_build_twice_gives_the_same_bytes(tmp_path: Path, signer: Signer) -> None:
    first = archive(tmp_path / "a", signer)
    # Same files, different host facts: other mtimes, modes, creation order.
    second_root = tmp_path / "b"
    run_dir = make_run(second_root)
    for path in run_dir.rglob("*"):
        os.utime(path, (EPOCH + 12345, EPOCH + 12345))
        if path.is_file() and not os.access(path, os.X_OK):
            path.chmod(0o600)
    second = write_archive(run_dir, signer=signer, provenance_inputs=INPUTS, epoch=EPOCH)
    assert first.sha256 == second.sha256
    assert first.path.read_bytes() == second.path.read_bytes()
    assert hashlib.sha256(first.path.read_bytes()).hexdigest() == first.sha256
    # Re-archiving the same run directory replaces the generated files and gives it again.
    third = write_archive(first.run_dir, signer=signer, provenance_inputs=INPUTS, epoch=EPOCH)
    assert third.sha256 == first.sha256


def test_members_are_normalised_and_sorted(tmp_path: Path, signer: Signer) -> None:
    info = archive(tmp_path, signer)
    with tarfile.open(info.path, "r:gz") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names[0] == "run-1"
    assert all(n == "run-1" or n.startswith("run-1/") for n in names)
    keys = [tuple(n.split("/")) for n in names]
    assert keys == sorted(keys)
    for m in members:
        assert m.isfile() or m.isdir()
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", EPOCH)
        expected = 0o755 if m.isdir() or m.name.endswith("replay.sh") else 0o644
        assert m.mode == expected, m.name
    # The empty receiver/store directory carries nothing SHA256SUMS could vouch for.
    assert not any(n.endswith("/store") for n in names)
    # Long and non-ASCII names are carried by PAX records, not GNU extensions.
    long_member = next(m for m in members if m.name.endswith("é.txt"))
    assert long_member.pax_headers.get("path") == long_member.name
    raw = info.path.read_bytes()
    assert raw[:3] == b"\x1f\x8b\x08"
    assert raw[3] & 0x08 == 0, "gzip header must not carry a file name"
    assert raw[4:8] == b"\0\0\0\0", "gzip header mtime must be 0"


def test_source_date_epoch_is_honoured(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1000000000")
    info = archive(tmp_path, signer)
    with tarfile.open(info.path, "r:gz") as tar:
        assert {m.mtime for m in tar.getmembers()} == {1_000_000_000}
    assert archive_epoch(5, {}) == 5
    assert archive_epoch(5, {"SOURCE_DATE_EPOCH": "7"}) == 7
    with pytest.raises(ArchiveError, match="SOURCE_DATE_EPOCH"):
        archive_epoch(5, {"SOURCE_DATE_EPOCH": "yesterday"})


def test_checksums_cover_every_other_member(tmp_path: Path, signer: Signer) -> None:
    info = archive(tmp_path, signer)
    run_dir = info.run_dir
    listed = parse_checksums((run_dir / CHECKSUMS).read_text())
    files = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}
    files -= UNLISTED
    assert set(listed) == files
    assert PUBKEY in listed and PROVENANCE in listed
    for name, digest in listed.items():
        assert hashlib.sha256((run_dir / name).read_bytes()).hexdigest() == digest
    text = (run_dir / CHECKSUMS).read_text()
    assert text == render_checksums(listed)


def test_provenance_subjects_and_signature(tmp_path: Path, signer: Signer) -> None:
    info = archive(tmp_path, signer)
    line = (info.run_dir / PROVENANCE).read_text()
    assert line.count("\n") == 1
    statement = open_envelope(json.loads(line), signer.public_key, what="provenance")
    names = [s["name"] for s in statement["subject"]]
    listed = parse_checksums((info.run_dir / CHECKSUMS).read_text())
    assert set(names) == set(listed) - {PROVENANCE, CHECKSUMS_GNU}
    assert PUBKEY in names


def test_sha256sum_check_passes_with_real_coreutils(tmp_path: Path, signer: Signer) -> None:
    sha256sum = shutil.which("sha256sum")
    require("sha256sum", sha256sum is not None, "coreutils sha256sum is not on PATH")
    assert sha256sum is not None
    info = archive(tmp_path, signer)
    extract = tmp_path / "extract"
    extract.mkdir()
    with tarfile.open(info.path, "r:gz") as tar:
        tar.extractall(extract, filter="data")
    done = run([sha256sum, "--strict", "-c", CHECKSUMS], cwd=extract / "run-1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": OK") == len(parse_checksums((info.run_dir / CHECKSUMS).read_text()))
    # What sha256sum --tag writes is exactly our format.
    tagged = run([sha256sum, "--tag", "results.json"], cwd=extract / "run-1").stdout
    assert tagged in (info.run_dir / CHECKSUMS).read_text()
    # The published checksum beside the archive.
    done = run([sha256sum, "-c", info.checksum_file.name], cwd=info.path.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    # And sha256sum notices a changed member.
    (extract / "run-1" / "results.json").write_text("{}")
    assert run([sha256sum, "-c", CHECKSUMS], cwd=extract / "run-1").returncode != 0


def test_signatures_pass_signify_and_minisign(tmp_path: Path, signer: Signer) -> None:
    signify = shutil.which("signify-openbsd")
    minisign = shutil.which("minisign")
    require("signify", signify is not None, "signify-openbsd is not on PATH")
    require("minisign", minisign is not None, "minisign is not on PATH")
    assert signify is not None and minisign is not None
    info = archive(tmp_path, signer)
    run_dir = info.run_dir
    done = run([signify, "-V", "-p", PUBKEY, "-m", CHECKSUMS], cwd=run_dir)
    assert done.returncode == 0, done.stderr
    done = run([minisign, "-V", "-p", PUBKEY, "-m", CHECKSUMS, "-x", CHECKSUMS_SIG], cwd=run_dir)
    assert done.returncode == 0, done.stderr
    pub = str(run_dir / PUBKEY)
    sums = info.checksum_file.name
    done = run(
        [signify, "-V", "-p", pub, "-m", sums, "-x", info.checksum_sig.name], info.path.parent
    )
    assert done.returncode == 0, done.stderr
    done = run(
        [minisign, "-V", "-p", pub, "-m", sums, "-x", info.checksum_sig.name], info.path.parent
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("form", ["signify", "pem", "minisign"])
def test_private_key_in_run_directory_is_refused(
    tmp_path: Path, signer: Signer, form: str, assets: Path
) -> None:
    run_dir = make_run(tmp_path)
    if form == "signify":
        keys = generate_keypair(tmp_path / "other-keys")
        shutil.copyfile(keys.secret, run_dir / "oops.sec")
    elif form == "pem":
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        (run_dir / "baseline" / "key.pem").write_bytes(pem)
    else:
        (run_dir / "minisign.key").write_text(
            "untrusted comment: minisign encrypted secret key\nRWQAAEIy" + "A" * 200 + "\n"
        )
    with pytest.raises(ArchiveError, match="holds a private key"):
        write_archive(run_dir, signer=signer, provenance_inputs=INPUTS, epoch=EPOCH)
    assert not (run_dir.parent / "run-1.tar.gz").exists()


def test_symlink_in_run_directory_is_refused(tmp_path: Path, signer: Signer) -> None:
    run_dir = make_run(tmp_path)
    (run_dir / "link").symlink_to("/etc/hostname")
    with pytest.raises(ArchiveError, match="symbolic link"):
        write_archive(run_dir, signer=signer, provenance_inputs=INPUTS, epoch=EPOCH)


def test_fifo_in_run_directory_is_refused(tmp_path: Path, signer: Signer) -> None:
    run_dir = make_run(tmp_path)
    os.mkfifo(run_dir / "pipe")
    with pytest.raises(ArchiveError, match="not a regular file"):
        write_archive(run_dir, signer=signer, provenance_inputs=INPUTS, epoch=EPOCH)


def test_unsafe_file_name_is_refused(tmp_path: Path, signer: Signer) -> None:
    run_dir = make_run(tmp_path)
    (run_dir / "bad\nname").write_text("x")
    with pytest.raises(ArchiveError, match="control character"):
        write_archive(run_dir, signer=signer, provenance_inputs=INPUTS, epoch=EPOCH)


def test_ephemeral_signer_is_stated_in_every_signed_place(tmp_path: Path) -> None:
    signer = Signer.ephemeral()
    info = archive(tmp_path, signer)
    assert info.ephemeral and info.key_id == signer.key_id
    assert "ephemeral" in (info.run_dir / PUBKEY).read_text().splitlines()[0]
    assert "key:ephemeral" in (info.run_dir / CHECKSUMS_SIG).read_text()
    statement = open_envelope(
        json.loads((info.run_dir / PROVENANCE).read_text()), signer.public_key, what="p"
    )
    signing = statement["predicate"]["buildDefinition"]["internalParameters"]["signing"]
    assert signing == {"keyId": signer.key_id, "ephemeral": True}


def test_build_tarball_without_signing(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    dest = tmp_path / "plain.tar.gz"
    digest = build_tarball(run_dir, dest, epoch=0)
    assert digest == hashlib.sha256(dest.read_bytes()).hexdigest()
    with gzip.open(dest) as fh:
        assert fh.read(1)
    assert not dest.with_name("plain.tar.gz.partial").exists()


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("/etc/passwd", "absolute"),
        ("a/../b", "'..'"),
        ("a//b", "empty"),
        ("./a", "'.'"),
        ("a\\b", "backslash"),
        ("", "empty"),
    ],
)
def test_name_problem(name: str, problem: str) -> None:
    found = name_problem(name)
    assert found is not None and problem in found
    assert name_problem("run/a b/é.txt") is None


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("SHA256 (a) = " + "0" * 64, "no line feed"),
        ("SHA256 (a) = " + "0" * 63 + "\n", "line 1"),
        ("sha256 (a) = " + "0" * 64 + "\n", "line 1"),
        ("SHA256 (a) = " + "0" * 64 + "\nSHA256 (a) = " + "1" * 64 + "\n", "listed twice"),
        ("SHA256 (../a) = " + "0" * 64 + "\n", "'..'"),
        ("SHA256 (a) = " + "0" * 64 + "\n\n", "line 2"),
    ],
)
def test_parse_checksums_is_strict(text: str, match: str) -> None:
    with pytest.raises(ArchiveError, match=match):
        parse_checksums(text)
