"""Ed25519 key files in the OpenBSD signify format (and PEM), and key generation.

signify's files are one ``untrusted comment: ...`` line and one base64 line. The decoded
structures (``signify.c`` in OpenBSD ``usr.bin/signify``; minisign reads the same public key
and signature layout) are::

    public key  "Ed" | keynum[8] | pubkey[32]                                     (42 bytes)
    secret key  "Ed" | "BK" | kdfrounds[4, big-endian] | salt[16] | checksum[8]
                | keynum[8] | seckey[64]                                         (104 bytes)
    signature   "Ed" | keynum[8] | sig[64]                                        (74 bytes)

``seckey`` is libsodium's 64-byte form (seed || public key), XOR-ed with a bcrypt-pbkdf key
stream; with ``kdfrounds`` 0 the stream is all zeros, so the key is stored unencrypted (what
``signify-openbsd -G -n`` writes). ``checksum`` is the first 8 bytes of SHA-512(seckey).

    paths = generate_keypair(Path("keys"))          # keys/lab.sec (0600), lab.pub, lab.pub.pem
    public = PublicKey.load(paths.public)
    public.key_id                                    # "3C1B...": what minisign prints
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from lab.errors import SigningError
from lab.host.writable import check_writable_dir

PKALG = b"Ed"
KDFALG = b"BK"
COMMENT_PREFIX = "untrusted comment: "
PUBLIC_KEY_LEN = 2 + 8 + 32
SECRET_KEY_LEN = 2 + 2 + 4 + 16 + 8 + 8 + 64
SIGNATURE_LEN = 2 + 8 + 64

SECRET_KEY_NAME = "lab.sec"
PUBLIC_KEY_NAME = "lab.pub"
PUBLIC_PEM_NAME = "lab.pub.pem"

#: a directory holding one of these is a run directory (or an archive's tree): keys never go
#: there, because everything in it is published
RUN_DIR_MARKERS: tuple[str, ...] = ("results.json", "SHA256SUMS", "commands.jsonl")


def derive_keynum(public_raw: bytes) -> bytes:
    """The 8-byte key number we give keys we create: the start of SHA-256(public key).

    signify draws it at random; deriving it makes the signify and PEM forms of one key agree
    on its id, and a PEM key loaded later gets the same id back.
    """
    return hashlib.sha256(public_raw).digest()[:8]


def key_id_of(keynum: bytes) -> str:
    """The key id as minisign prints it: the keynum read as a little-endian uint64, in hex."""
    return f"{int.from_bytes(keynum, 'little'):016X}"


def _b64decode(text: str, *, what: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SigningError(f"{what}: the key/signature line is not valid base64.") from exc


def read_signify_text(text: str, *, what: str) -> tuple[str, bytes, list[str]]:
    """Split a signify-format text into (comment, decoded second line, remaining lines)."""
    lines = text.splitlines()
    if len(lines) < 2 or not lines[0].startswith(COMMENT_PREFIX):
        raise SigningError(
            f"{what} is not in signify format (expected an 'untrusted comment:' line "
            "followed by a base64 line)."
        )
    return lines[0][len(COMMENT_PREFIX) :], _b64decode(lines[1], what=what), lines[2:]


def render_signify_text(comment: str, blob: bytes) -> str:
    if "\n" in comment or "\r" in comment:
        raise SigningError("a signify comment must be one line; remove the line break.")
    return f"{COMMENT_PREFIX}{comment}\n{base64.b64encode(blob).decode('ascii')}\n"


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key with its signify key number (``None`` for a bare PEM key)."""

    raw: bytes
    keynum: bytes | None = None

    def __post_init__(self) -> None:
        if len(self.raw) != 32:
            raise SigningError("an Ed25519 public key is 32 bytes; this one is not.")
        if self.keynum is not None and len(self.keynum) != 8:
            raise SigningError("a signify key number is 8 bytes; this one is not.")

    @property
    def key_id(self) -> str:
        return key_id_of(self.keynum if self.keynum is not None else derive_keynum(self.raw))

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the raw 32-byte public key, in hex: independent of the file format."""
        return hashlib.sha256(self.raw).hexdigest()

    def crypto(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(self.raw)

    def verify(self, signature: bytes, message: bytes) -> bool:
        """True when ``signature`` is this key's Ed25519 signature of ``message``."""
        if len(signature) != 64:
            return False
        try:
            self.crypto().verify(signature, message)
        except InvalidSignature:
            return False
        return True

    # --- formats -------------------------------------------------------------------------
    @classmethod
    def from_signify(cls, text: str, *, what: str = "public key") -> PublicKey:
        _, blob, _ = read_signify_text(text, what=what)
        if len(blob) != PUBLIC_KEY_LEN or blob[:2] != PKALG:
            raise SigningError(
                f"{what} is not a signify Ed25519 public key ({len(blob)} bytes, "
                f"algorithm {blob[:2]!r}); expected 42 bytes starting with 'Ed'."
            )
        return cls(raw=blob[10:], keynum=blob[2:10])

    @classmethod
    def from_pem(cls, data: bytes, *, what: str = "public key") -> PublicKey:
        try:
            key = serialization.load_pem_public_key(data)
        except ValueError as exc:
            raise SigningError(f"{what} is not a readable PEM public key.") from exc
        if not isinstance(key, Ed25519PublicKey):
            raise SigningError(f"{what} is a PEM public key but not an Ed25519 one.")
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return cls(raw=raw)

    @classmethod
    def parse(cls, data: bytes, *, what: str = "public key") -> PublicKey:
        """Read either format: signify (``untrusted comment:``) or PEM."""
        if data.lstrip().startswith(b"-----BEGIN"):
            return cls.from_pem(data, what=what)
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError as exc:
            raise SigningError(f"{what} is neither a signify nor a PEM public key.") from exc
        return cls.from_signify(text, what=what)

    @classmethod
    def load(cls, path: Path) -> PublicKey:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SigningError(f"{path}: cannot read the public key ({exc.strerror}).") from exc
        return cls.parse(data, what=str(path))

    def signify_blob(self) -> bytes:
        keynum = self.keynum if self.keynum is not None else derive_keynum(self.raw)
        return PKALG + keynum + self.raw

    def to_signify(self, comment: str) -> str:
        return render_signify_text(comment, self.signify_blob())

    def to_pem(self) -> bytes:
        return self.crypto().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


@dataclass(frozen=True)
class SecretKey:
    """An Ed25519 private key with its signify key number."""

    private: Ed25519PrivateKey
    keynum: bytes

    @property
    def public(self) -> PublicKey:
        raw = self.private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return PublicKey(raw=raw, keynum=self.keynum)

    @classmethod
    def generate(cls) -> SecretKey:
        private = Ed25519PrivateKey.generate()
        raw = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return cls(private=private, keynum=derive_keynum(raw))

    @classmethod
    def from_signify(cls, text: str, *, what: str) -> SecretKey:
        _, blob, _ = read_signify_text(text, what=what)
        if len(blob) != SECRET_KEY_LEN or blob[:2] != PKALG or blob[2:4] != KDFALG:
            raise SigningError(
                f"{what} is not a signify Ed25519 secret key (expected 104 bytes starting "
                "with 'EdBK')."
            )
        rounds = int.from_bytes(blob[4:8], "big")
        if rounds != 0:
            raise SigningError(
                f"{what} is protected by a passphrase ({rounds} kdf rounds), which the lab "
                "cannot prompt for; create an unencrypted key with "
                "'python -m lab keys generate' or 'signify-openbsd -G -n'."
            )
        checksum, keynum, seckey = blob[24:32], blob[32:40], blob[40:104]
        if hashlib.sha512(seckey).digest()[:8] != checksum:
            raise SigningError(f"{what}: the secret key's checksum does not match; it is damaged.")
        private = Ed25519PrivateKey.from_private_bytes(seckey[:32])
        key = cls(private=private, keynum=keynum)
        if key.public.raw != seckey[32:]:
            raise SigningError(f"{what}: the secret key's public half does not match its seed.")
        return key

    @classmethod
    def from_pem(cls, data: bytes, *, what: str) -> SecretKey:
        try:
            private = serialization.load_pem_private_key(data, password=None)
        except TypeError as exc:  # encrypted PEM and no password
            raise SigningError(
                f"{what} is an encrypted PEM key; the lab needs an unencrypted one."
            ) from exc
        except ValueError as exc:
            raise SigningError(f"{what} is not a readable PEM private key.") from exc
        if not isinstance(private, Ed25519PrivateKey):
            raise SigningError(f"{what} is a PEM private key but not an Ed25519 one.")
        raw = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return cls(private=private, keynum=derive_keynum(raw))

    @classmethod
    def parse(cls, data: bytes, *, what: str) -> SecretKey:
        stripped = data.strip()
        if stripped.startswith(b"-----BEGIN"):
            return cls.from_pem(stripped, what=what)
        try:
            text = stripped.decode("ascii")
        except UnicodeDecodeError as exc:
            raise SigningError(f"{what} is neither a signify nor a PEM private key.") from exc
        if not text.startswith(COMMENT_PREFIX) and "\n" not in text:
            # CI secret stores often keep only the base64 line; restore the comment line.
            text = f"{COMMENT_PREFIX}signify secret key\n{text}\n"
        return cls.from_signify(text, what=what)

    def to_signify(self, comment: str) -> str:
        seed = self.private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        seckey = seed + self.public.raw
        checksum = hashlib.sha512(seckey).digest()[:8]
        salt = secrets.token_bytes(16)  # unused with 0 rounds; signify still writes one
        blob = PKALG + KDFALG + (0).to_bytes(4, "big") + salt + checksum + self.keynum + seckey
        return render_signify_text(comment, blob)


def looks_like_private_key(data: bytes) -> bool:
    """True when ``data`` holds private key material in a format the lab knows."""
    if b"PRIVATE KEY-----" in data:
        return True
    lines = data.splitlines()
    if len(lines) >= 2 and lines[0].startswith(COMMENT_PREFIX.encode()):
        if b"secret key" in lines[0]:  # signify's and minisign's own comment for secret keys
            return True
        try:
            blob = base64.b64decode(lines[1].strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return len(blob) == SECRET_KEY_LEN and blob[:4] == PKALG + KDFALG
    return False


def inside_run_directory(path: Path) -> Path | None:
    """The run directory ``path`` is in (or is), or ``None``.

    A run directory is published whole, so a private key must never be written there.
    """
    resolved = path.resolve()
    for candidate in (resolved, *resolved.parents):
        if any((candidate / marker).exists() for marker in RUN_DIR_MARKERS):
            return candidate
        if candidate.name == "artifacts" or candidate.parent.name == "artifacts":
            return candidate
    return None


def check_private_permissions(path: Path) -> None:
    """Refuse a private key file that group or others can access."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise SigningError(
            f"{path} is accessible by group or others (mode {mode:04o}); "
            f"run 'chmod 600 {path}' and try again."
        )


def _write_temp(path: Path, data: bytes, mode: int) -> Path:
    """``data`` in a new temporary file beside ``path`` (mode ``mode``, synced to disk).

    Created with ``O_EXCL | O_NOFOLLOW``: nothing planted there (a symlink to a file the
    lab would otherwise overwrite) is followed."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)  # O_CREAT's mode is filtered by the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


@dataclass(frozen=True)
class KeyPairPaths:
    secret: Path
    public: Path
    public_pem: Path
    key_id: str


def generate_keypair(
    out_dir: Path, *, name: str = "lab", comment: str = "lab", force: bool = False
) -> KeyPairPaths:
    """Write ``<name>.sec`` (signify, unencrypted, mode 0600), ``<name>.pub`` and
    ``<name>.pub.pem``. ``signify-openbsd -S -s <name>.sec`` signs with the secret key.

    Refused unless none of the three exists (``force`` replaces them): a new secret key beside
    an old public key is a mismatched pair. Each file is written to a temporary file first
    and renamed into place, so a failure leaves the old files (or none), and a symlink at
    one of the names is replaced, never followed."""
    run_dir = inside_run_directory(out_dir)
    if run_dir is not None:
        raise SigningError(
            f"{out_dir} is inside the run directory {run_dir}, which is published; "
            "write keys somewhere else (e.g. --out ~/.config/lab)."
        )
    check_writable_dir(out_dir, option="--out", error=SigningError)
    secret, public, pem = (out_dir / f"{name}{suffix}" for suffix in (".sec", ".pub", ".pub.pem"))
    present = [p.name for p in (secret, public, pem) if os.path.lexists(p)]
    if present and not force:
        raise SigningError(
            f"{out_dir}: a key file already exists ({', '.join(present)}); remove the pair "
            "or pass --force to replace all of it."
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SigningError(f"--out {out_dir}: cannot create it ({exc.strerror}).") from None
    key = SecretKey.generate()
    contents = [
        (secret, key.to_signify(f"{comment} secret key").encode(), 0o600),
        (public, key.public.to_signify(f"{comment} public key").encode(), 0o644),
        (pem, key.public.to_pem(), 0o644),
    ]
    written: list[tuple[Path, Path]] = []
    try:
        for path, data, mode in contents:
            written.append((_write_temp(path, data, mode), path))
    except OSError as exc:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        raise SigningError(f"{out_dir}: cannot write the key files ({exc.strerror}).") from None
    try:
        for tmp, path in written:  # every file is complete before the first rename
            os.replace(tmp, path)
    except OSError as exc:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        raise SigningError(f"{exc.filename}: cannot be replaced ({exc.strerror}).") from None
    dir_fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return KeyPairPaths(secret=secret, public=public, public_pem=pem, key_id=key.public.key_id)
