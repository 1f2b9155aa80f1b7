"""A real archive, unpacked, checked by the standard tools a reviewer already has (not ours):
``signify -C`` on the embedded list, ``signify -V`` and ``minisign -V`` on the detached
signature, ``openssl pkeyutl -verify`` with ``lab.pub.pem``, GNU coreutils' and busybox's
``sha256sum -c`` on the lists; and each tool noticing tampering. A missing tool skips and
names itself, unless ``LAB_REQUIRE_CAPABILITIES`` lists it (``tests.conftest.require``)."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from lab.evidence.archive import (
    CHECKSUMS,
    CHECKSUMS_GNU,
    CHECKSUMS_SIG,
    CHECKSUMS_SIGNIFY,
    PUBKEY,
    PUBKEY_PEM,
    parse_checksums,
)
from lab.evidence.keys import PublicKey, generate_keypair
from lab.evidence.signing import Signer
from tests.conftest import require
from tests.unit.evidence.test_archive import archive


def tool(capability: str, command: str) -> str:
    path = shutil.which(command)
    require(capability, path is not None, f"{command} is not on PATH")
    assert path is not None
    return path


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=60)


@pytest.fixture
def unpacked(tmp_path: Path) -> Path:
    """A fresh archive of a small run (no client run), extracted as a reviewer would."""
    signer = Signer.from_file(generate_keypair(tmp_path / "keys").secret)
    info = archive(tmp_path, signer)
    extract = tmp_path / "extract"
    extract.mkdir()
    with tarfile.open(info.path, "r:gz") as tar:
        tar.extractall(extract, filter="data")
    return extract / info.run_dir.name


def test_signify_checksum_mode_verifies_every_file(unpacked: Path) -> None:
    signify = tool("signify", "signify-openbsd")
    done = run([signify, "-C", "-p", PUBKEY, "-x", CHECKSUMS_SIGNIFY], cwd=unpacked)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = parse_checksums((unpacked / CHECKSUMS).read_text())
    assert done.stdout.count(": OK") == len(listed), done.stdout
    assert "Signature Verified" in done.stdout


def test_signify_checksum_mode_catches_a_changed_file(unpacked: Path) -> None:
    signify = tool("signify", "signify-openbsd")
    (unpacked / "results.json").write_text("{}")
    done = run([signify, "-C", "-p", PUBKEY, "-x", CHECKSUMS_SIGNIFY], cwd=unpacked)
    assert done.returncode != 0
    assert "results.json: FAIL" in done.stdout + done.stderr


def test_signify_checksum_mode_catches_a_changed_list(unpacked: Path) -> None:
    signify = tool("signify", "signify-openbsd")
    data = (unpacked / CHECKSUMS_SIGNIFY).read_bytes()
    (unpacked / CHECKSUMS_SIGNIFY).write_bytes(data.replace(b"results.json", b"results.jsom"))
    done = run([signify, "-C", "-p", PUBKEY, "-x", CHECKSUMS_SIGNIFY], cwd=unpacked)
    assert done.returncode != 0
    assert "signature verification failed" in done.stderr


def test_signify_and_minisign_verify_the_detached_signature(unpacked: Path) -> None:
    signify = tool("signify", "signify-openbsd")
    minisign = tool("minisign", "minisign")
    done = run([signify, "-V", "-p", PUBKEY, "-m", CHECKSUMS], cwd=unpacked)
    assert done.returncode == 0, done.stderr
    done = run([minisign, "-V", "-p", PUBKEY, "-m", CHECKSUMS, "-x", CHECKSUMS_SIG], unpacked)
    assert done.returncode == 0, done.stderr
    (unpacked / CHECKSUMS).write_text((unpacked / CHECKSUMS).read_text() + "\n")
    assert run([signify, "-V", "-p", PUBKEY, "-m", CHECKSUMS], cwd=unpacked).returncode != 0
    argv = [minisign, "-V", "-p", PUBKEY, "-m", CHECKSUMS, "-x", CHECKSUMS_SIG]
    assert run(argv, unpacked).returncode != 0


def test_openssl_verifies_the_raw_signature_with_the_pem_key(unpacked: Path) -> None:
    """signify's signature line, decoded, is ``"Ed" | keynum | sig``: the last 64 bytes are a
    plain Ed25519 signature of SHA256SUMS that openssl checks with lab.pub.pem."""
    openssl = tool("openssl", "openssl")
    blob = base64.b64decode((unpacked / CHECKSUMS_SIG).read_text().splitlines()[1])
    (unpacked.parent / "sums.sig").write_bytes(blob[10:])
    argv = [openssl, "pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", PUBKEY_PEM]
    argv += ["-in", CHECKSUMS, "-sigfile", "../sums.sig"]
    done = run(argv, cwd=unpacked)
    assert done.returncode == 0 and "Signature Verified Successfully" in done.stdout, done.stderr
    (unpacked / CHECKSUMS).write_text((unpacked / CHECKSUMS).read_text() + "\n")
    assert run(argv, cwd=unpacked).returncode != 0
    # The key id the lab prints for lab.pub and lab.pub.pem is the one minisign -V prints
    # (minisign 0.11 drops leading zeros; later versions print all 16 digits).
    minisign = shutil.which("minisign")
    if minisign is not None:
        key_id = PublicKey.load(unpacked / PUBKEY_PEM).key_id
        assert key_id == PublicKey.load(unpacked / PUBKEY).key_id
        other = unpacked.parent / "other.pub"
        other.write_text(Signer.ephemeral().public_key_file())
        argv = [minisign, "-V", "-p", str(other), "-m", CHECKSUMS, "-x", CHECKSUMS_SIG]
        done = run(argv, unpacked)
        said = done.stdout + done.stderr
        printed = re.search(rf"key id in {re.escape(CHECKSUMS_SIG)} is ([0-9A-F]+)", said)
        assert done.returncode != 0 and printed is not None, said
        assert printed[1].rjust(16, "0") == key_id


@pytest.mark.parametrize("listing", [CHECKSUMS, CHECKSUMS_GNU])
def test_coreutils_sha256sum_checks_both_lists(unpacked: Path, listing: str) -> None:
    sha256sum = tool("sha256sum", "sha256sum")
    done = run([sha256sum, "--strict", "-c", listing], cwd=unpacked)
    assert done.returncode == 0, done.stdout + done.stderr
    count = len(parse_checksums((unpacked / listing).read_text(), gnu=listing == CHECKSUMS_GNU))
    assert done.stdout.count(": OK") == count
    (unpacked / "results.json").write_text("{}")
    done = run([sha256sum, "-c", listing], cwd=unpacked)
    assert done.returncode != 0 and "results.json: FAILED" in done.stdout


def test_busybox_sha256sum_checks_the_gnu_list(unpacked: Path) -> None:
    """busybox (Alpine's sha256sum) rejects BSD-tagged lines; SHA256SUMS.gnu is for it, and
    its own digest is on a signed SHA256SUMS line a busybox shell can turn into GNU form."""
    busybox = tool("busybox", "busybox")
    done = run([busybox, "sha256sum", "-c", CHECKSUMS_GNU], cwd=unpacked)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = parse_checksums((unpacked / CHECKSUMS_GNU).read_text(), gnu=True)
    assert done.stdout.count(": OK") == len(listed)
    script = f"sed -n 's/^SHA256 ({CHECKSUMS_GNU}) = \\(.*\\)$/\\1  {CHECKSUMS_GNU}/p' SHA256SUMS"
    done = run([busybox, "sh", "-c", f"{script} | {busybox} sha256sum -c"], cwd=unpacked)
    assert done.returncode == 0 and f"{CHECKSUMS_GNU}: OK" in done.stdout, done.stderr
    (unpacked / "results.json").write_text("{}")
    assert run([busybox, "sha256sum", "-c", CHECKSUMS_GNU], cwd=unpacked).returncode != 0
