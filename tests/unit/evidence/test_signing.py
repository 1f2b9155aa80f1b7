"""Keys and signatures: our files against the real signify-openbsd, minisign and openssl."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from lab.errors import SigningError
from lab.evidence.keys import (
    PublicKey,
    SecretKey,
    generate_keypair,
    inside_run_directory,
    key_id_of,
    looks_like_private_key,
)
from lab.evidence.signing import KEY_ENV, DetachedSignature, Signer, verify_detached
from tests.conftest import require

SIGNIFY = shutil.which("signify-openbsd")
MINISIGN = shutil.which("minisign")
OPENSSL = shutil.which("openssl")


def need(tool: str, path: str | None) -> str:
    capability = {"signify-openbsd": "signify"}.get(tool, tool)
    require(capability, path is not None, f"{tool} is not on PATH")
    assert path is not None
    return path


def run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def signing_assets(assets: Path) -> Path:
    return assets / "signing"


@pytest.fixture
def test_secret(tmp_path: Path, signing_assets: Path) -> Path:
    """signify's own test key, copied with mode 0600 (git does not keep modes)."""
    copy = tmp_path / "keys" / "test-only.sec"
    copy.parent.mkdir()
    shutil.copyfile(signing_assets / "test-only.sec", copy)
    copy.chmod(0o600)
    return copy


# --- key generation -------------------------------------------------------------------------
def test_generate_keypair_writes_three_files_with_safe_modes(tmp_path: Path) -> None:
    paths = generate_keypair(tmp_path / "keys")
    assert paths.secret.stat().st_mode & 0o777 == 0o600
    assert paths.public.read_text().startswith("untrusted comment: ")
    assert paths.public_pem.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    signify_pub = PublicKey.load(paths.public)
    pem_pub = PublicKey.load(paths.public_pem)
    assert signify_pub.raw == pem_pub.raw
    assert signify_pub.key_id == pem_pub.key_id == paths.key_id
    assert looks_like_private_key(paths.secret.read_bytes())
    assert not looks_like_private_key(paths.public.read_bytes())


def test_generate_keypair_refuses_to_overwrite(tmp_path: Path) -> None:
    generate_keypair(tmp_path)
    with pytest.raises(SigningError, match="already exists"):
        generate_keypair(tmp_path)
    generate_keypair(tmp_path, force=True)


@pytest.mark.parametrize("marker", ["results.json", "SHA256SUMS", "commands.jsonl"])
def test_generate_keypair_refuses_a_run_directory(tmp_path: Path, marker: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / marker).write_text("{}")
    with pytest.raises(SigningError, match="inside the run directory"):
        generate_keypair(run_dir / "keys")
    assert not (run_dir / "keys").exists()


def test_generate_keypair_refuses_artifacts_subdirectory(tmp_path: Path) -> None:
    target = tmp_path / "artifacts" / "20260101T000000Z-abc"
    assert inside_run_directory(target) == target
    assert inside_run_directory(tmp_path / "artifacts") == tmp_path / "artifacts"
    assert inside_run_directory(tmp_path / "keys") is None
    with pytest.raises(SigningError, match="published"):
        generate_keypair(target)


def test_generated_secret_key_signs_with_real_signify(tmp_path: Path) -> None:
    signify = need("signify-openbsd", SIGNIFY)
    paths = generate_keypair(tmp_path)
    message = tmp_path / "msg"
    message.write_bytes(b"evidence\n")
    done = run([signify, "-S", "-s", str(paths.secret), "-m", str(message)])
    assert done.returncode == 0, done.stderr
    done = run([signify, "-V", "-p", str(paths.public), "-m", str(message)])
    assert done.returncode == 0, done.stderr
    # Ed25519 is deterministic: signify's signature equals ours, byte for byte.
    ours = Signer.from_file(paths.secret).sign_detached(message.read_bytes(), file_name="msg")
    theirs = (tmp_path / "msg.sig").read_text()
    assert ours.splitlines()[1] == theirs.splitlines()[1]


# --- loading keys ---------------------------------------------------------------------------
def test_signify_generated_key_loads_and_matches_signify(
    test_secret: Path, signing_assets: Path
) -> None:
    signer = Signer.from_file(test_secret)
    public = PublicKey.load(signing_assets / "test-only.pub")
    assert signer.public_key == public
    message = (signing_assets / "message.txt").read_bytes()
    ours = signer.sign_detached(message, file_name="message.txt")
    theirs = (signing_assets / "message.txt.sig").read_text()
    assert ours.splitlines()[1] == theirs.splitlines()[1]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_private_key_readable_by_others_is_refused(test_secret: Path, mode: int) -> None:
    test_secret.chmod(mode)
    with pytest.raises(SigningError) as excinfo:
        Signer.from_file(test_secret)
    message = str(excinfo.value)
    assert f"mode {mode:04o}" in message and "chmod 600" in message
    assert message.count(". ") == 0 and message.endswith(".")


def test_from_env_reads_a_path(test_secret: Path) -> None:
    signer = Signer.from_env({KEY_ENV: str(test_secret)})
    assert not signer.is_ephemeral
    assert signer.source == f"{KEY_ENV} (file test-only.sec)"


@pytest.mark.parametrize("form", ["two-lines", "base64-only", "pem"])
def test_from_env_reads_key_text(test_secret: Path, form: str) -> None:
    reference = Signer.from_file(test_secret)
    text = test_secret.read_text()
    if form == "base64-only":
        text = text.splitlines()[1]
    elif form == "pem":
        key = SecretKey.from_signify(test_secret.read_text(), what="test")
        text = key.private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
    signer = Signer.from_env({KEY_ENV: text})
    assert signer.public_key.raw == reference.public_key.raw
    assert signer.source == f"{KEY_ENV} (key text)"
    assert not signer.is_ephemeral


def test_from_env_unset_gives_an_ephemeral_key() -> None:
    first = Signer.from_env({})
    second = Signer.from_env({KEY_ENV: "  "})
    assert first.is_ephemeral and second.is_ephemeral
    assert first.key_id != second.key_id
    described = first.describe()
    assert described["ephemeral"] is True
    assert described["authenticity"] == "not established"
    assert "authenticity is not established" in described["notice"]
    with pytest.raises(SigningError, match="not set"):
        Signer.from_env({}, allow_ephemeral=False)


def test_from_env_missing_path_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(SigningError, match="does not exist"):
        Signer.from_env({KEY_ENV: str(tmp_path / "nope.sec")})


def test_encrypted_signify_key_is_refused(tmp_path: Path) -> None:
    # signify only reads a passphrase from a terminal, so build the layout it writes for an
    # encrypted key: kdfrounds 42 instead of 0.
    key = SecretKey.generate()
    blob = bytearray(base64.b64decode(key.to_signify("x").splitlines()[1]))
    blob[4:8] = (42).to_bytes(4, "big")
    path = tmp_path / "enc.sec"
    path.write_text("untrusted comment: x\n" + base64.b64encode(bytes(blob)).decode() + "\n")
    path.chmod(0o600)
    with pytest.raises(SigningError, match="passphrase"):
        Signer.from_file(path)


def test_damaged_secret_key_is_refused(test_secret: Path) -> None:
    lines = test_secret.read_text().splitlines()
    blob = bytearray(base64.b64decode(lines[1]))
    blob[-40] ^= 0x01  # inside the seed: the checksum no longer matches
    test_secret.write_text(lines[0] + "\n" + base64.b64encode(bytes(blob)).decode() + "\n")
    with pytest.raises(SigningError, match="checksum"):
        Signer.from_file(test_secret)


def test_public_key_file_is_not_a_secret_key(signing_assets: Path, tmp_path: Path) -> None:
    copy = tmp_path / "pub-as-sec"
    shutil.copyfile(signing_assets / "test-only.pub", copy)
    copy.chmod(0o600)
    with pytest.raises(SigningError, match="not a signify Ed25519 secret key"):
        Signer.from_file(copy)


def test_repr_does_not_leak_the_key(test_secret: Path) -> None:
    signer = Signer.from_file(test_secret)
    secret_line = test_secret.read_text().splitlines()[1]
    assert secret_line not in repr(signer)
    assert signer.key_id in repr(signer)


# --- signatures -----------------------------------------------------------------------------
def test_key_id_matches_minisign(signing_assets: Path) -> None:
    public = PublicKey.load(signing_assets / "minisign-test-only.pub")
    comment = (signing_assets / "minisign-test-only.pub").read_text().splitlines()[0]
    assert comment.endswith(public.key_id)
    assert key_id_of(public.keynum or b"") == public.key_id


def test_verify_real_signify_and_minisign_signatures(signing_assets: Path) -> None:
    message = (signing_assets / "message.txt").read_bytes()
    parsed = verify_detached(
        message,
        (signing_assets / "message.txt.sig").read_text(),
        PublicKey.load(signing_assets / "test-only.pub"),
        what="message.txt.sig",
    )
    assert parsed.trusted_comment is None
    parsed = verify_detached(
        message,
        (signing_assets / "message.txt.minisig").read_text(),
        PublicKey.load(signing_assets / "minisign-test-only.pub"),
        what="message.txt.minisig",
    )
    assert parsed.trusted_comment == "file:message.txt"


def test_wrong_key_and_changed_message_are_rejected(signing_assets: Path) -> None:
    message = (signing_assets / "message.txt").read_bytes()
    sig = (signing_assets / "message.txt.sig").read_text()
    with pytest.raises(SigningError, match="was made by key"):
        verify_detached(
            message, sig, PublicKey.load(signing_assets / "minisign-test-only.pub"), what="s"
        )
    with pytest.raises(SigningError, match="does not verify"):
        verify_detached(
            message + b" ", sig, PublicKey.load(signing_assets / "test-only.pub"), what="s"
        )


def test_pem_key_without_keynum_still_verifies(signing_assets: Path) -> None:
    signify_pub = PublicKey.load(signing_assets / "test-only.pub")
    pem_only = PublicKey.parse(signify_pub.to_pem())
    assert pem_only.keynum is None
    verify_detached(
        (signing_assets / "message.txt").read_bytes(),
        (signing_assets / "message.txt.sig").read_text(),
        pem_only,
        what="s",
    )


def test_tampered_trusted_comment_is_rejected() -> None:
    signer = Signer.ephemeral()
    text = signer.sign_detached(b"data", file_name="data")
    forged = text.replace("key:ephemeral", "key:persistent")
    with pytest.raises(SigningError, match="trusted comment"):
        verify_detached(b"data", forged, signer.public_key, what="data.sig")


def test_signature_parse_rejects_garbage() -> None:
    with pytest.raises(SigningError, match="signify format"):
        DetachedSignature.parse("hello\n", what="x.sig")
    with pytest.raises(SigningError, match="not valid base64"):
        DetachedSignature.parse("untrusted comment: x\n!!!\n", what="x.sig")
    with pytest.raises(SigningError, match="extra lines"):
        signer = Signer.ephemeral()
        text = signer.sign_detached(b"d", file_name="d") + "junk\n"
        DetachedSignature.parse(text, what="x.sig")


def test_our_signature_passes_signify_minisign_and_openssl(tmp_path: Path) -> None:
    signify = need("signify-openbsd", SIGNIFY)
    minisign = need("minisign", MINISIGN)
    openssl = need("openssl", OPENSSL)
    signer = Signer.ephemeral()
    message = tmp_path / "SHA256SUMS"
    message.write_bytes(b"SHA256 (a) = " + b"0" * 64 + b"\n")
    (tmp_path / "lab.pub").write_text(signer.public_key_file())
    (tmp_path / "lab.pub.pem").write_bytes(signer.public_key.to_pem())
    sig = signer.sign_detached(message.read_bytes(), file_name="SHA256SUMS")
    (tmp_path / "SHA256SUMS.sig").write_text(sig)
    (tmp_path / "raw.sig").write_bytes(signer.sign(message.read_bytes()))

    done = run([signify, "-V", "-p", "lab.pub", "-m", "SHA256SUMS"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = run(
        [minisign, "-V", "-p", "lab.pub", "-m", "SHA256SUMS", "-x", "SHA256SUMS.sig"],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Trusted comment: file:SHA256SUMS" in done.stdout
    argv = [openssl, "pkeyutl", "-verify", "-pubin", "-inkey", "lab.pub.pem", "-rawin"]
    done = run([*argv, "-in", "SHA256SUMS", "-sigfile", "raw.sig"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout

    # And each tool rejects a changed message.
    message.write_bytes(message.read_bytes() + b"\n")
    assert run([signify, "-V", "-p", "lab.pub", "-m", "SHA256SUMS"], cwd=tmp_path).returncode
    assert run(
        [minisign, "-V", "-p", "lab.pub", "-m", "SHA256SUMS", "-x", "SHA256SUMS.sig"],
        cwd=tmp_path,
    ).returncode
    assert run([*argv, "-in", "SHA256SUMS", "-sigfile", "raw.sig"], cwd=tmp_path).returncode
