"""Who signs an evidence archive, and the detached signature files it writes.

A :class:`Signer` holds one Ed25519 key. Its signature files use the OpenBSD signify layout
with minisign's trusted comment appended (four lines)::

    untrusted comment: verify with lab.pub
    base64("Ed" | keynum[8] | Ed25519(message))
    trusted comment: file:SHA256SUMS
    base64(Ed25519(signature[64] | trusted comment text))

``signify-openbsd -V`` reads the first two lines; ``minisign -V`` (legacy ``Ed`` algorithm, no
pre-hashing) checks all four, so reviewers can use either tool. The *embedded* form
(``signify -S -e``, what ``signify -C`` reads) is signify's two lines followed by the message
itself, byte for byte.

    signer = Signer.from_env()              # LAB_SIGNING_KEY, or an ephemeral key
    text = signer.sign_detached(data, file_name="SHA256SUMS")
    verify_detached(data, text, signer.public_key, what="SHA256SUMS.sig")
    embedded = signer.sign_embedded(data)    # b"untrusted comment: ...\n<base64>\n" + data
    verify_embedded(embedded, signer.public_key, what="SHA256SUMS.signify") == data
    signer.describe()                        # {"ephemeral": ..., "key_id": ..., ...}
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lab.errors import SigningError
from lab.evidence.keys import (
    COMMENT_PREFIX,
    PKALG,
    SIGNATURE_LEN,
    PublicKey,
    SecretKey,
    check_private_permissions,
    key_id_of,
    read_signify_text,
)
from lab.model.records import SigningRecord

#: environment variable naming the signing key: a file path, or the key text itself
KEY_ENV = "LAB_SIGNING_KEY"
TRUSTED_PREFIX = "trusted comment: "

EPHEMERAL_NOTICE = (
    "signed with an ephemeral key generated for this run and discarded: the archive's "
    "integrity can be checked, its authenticity is not established"
)


class Signer:
    """One Ed25519 signing key and where it came from.

    Build one with a factory: :meth:`from_env`, :meth:`from_file`, :meth:`ephemeral`.
    """

    def __init__(self, *, key: SecretKey, ephemeral: bool, source: str) -> None:
        self._key = key
        #: True for a key generated for one run and discarded (``Signer.ephemeral()``)
        self.is_ephemeral = ephemeral
        #: where the key came from, for reports ("LAB_SIGNING_KEY (file)", "ephemeral")
        self.source = source

    def __repr__(self) -> str:  # never the key itself
        return (
            f"Signer(key_id={self.key_id!r}, ephemeral={self.is_ephemeral}, source={self.source!r})"
        )

    # --- factories -----------------------------------------------------------------------
    @classmethod
    def ephemeral(cls) -> Signer:
        """A fresh key kept only in memory: integrity without authenticity."""
        return cls(key=SecretKey.generate(), ephemeral=True, source="ephemeral")

    @classmethod
    def from_file(cls, path: Path) -> Signer:
        """A signify ``.sec`` (unencrypted) or PEM PKCS#8 key file, mode 0600 or stricter."""
        try:
            check_private_permissions(path)
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise SigningError(f"{path}: the signing key file does not exist.") from exc
        except OSError as exc:
            raise SigningError(f"{path}: cannot read the signing key ({exc.strerror}).") from exc
        key = SecretKey.parse(data, what=str(path))
        return cls(key=key, ephemeral=False, source=f"file {path.name}")

    @classmethod
    def from_text(cls, text: str, *, source: str) -> Signer:
        key = SecretKey.parse(text.encode("ascii", "replace"), what=source)
        return cls(key=key, ephemeral=False, source=source)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, allow_ephemeral: bool = True
    ) -> Signer:
        """The key named by ``LAB_SIGNING_KEY``; an ephemeral key when it is unset.

        The variable holds either a path to a key file or, as CI secret stores pass it, the
        key text itself (signify's two lines, its base64 line alone, or a PEM block).
        """
        value = (os.environ if env is None else env).get(KEY_ENV, "").strip()
        if not value:
            if allow_ephemeral:
                return cls.ephemeral()
            raise SigningError(
                f"{KEY_ENV} is not set and an ephemeral key is not allowed here; set it to "
                "the path of a key made by 'python -m lab keys generate'."
            )
        if _is_key_text(value):
            return cls.from_text(value, source=f"{KEY_ENV} (key text)")
        path = Path(value).expanduser()
        if not path.exists():
            raise SigningError(
                f"{KEY_ENV} names {path}, which does not exist; set it to a key file's path "
                "or to the key text."
            )
        signer = cls.from_file(path)
        signer.source = f"{KEY_ENV} (file {path.name})"
        return signer

    # --- identity ------------------------------------------------------------------------
    @property
    def public_key(self) -> PublicKey:
        return self._key.public

    @property
    def key_id(self) -> str:
        return self.public_key.key_id

    def describe(self) -> SigningRecord:
        """What reports and ``results.json`` show about the signing key."""
        return {
            "ephemeral": self.is_ephemeral,
            "key_id": self.key_id,
            "fingerprint": self.public_key.fingerprint,
            "source": self.source,
            "authenticity": "not established" if self.is_ephemeral else "key holder",
            "notice": EPHEMERAL_NOTICE if self.is_ephemeral else None,
        }

    def public_key_file(self) -> str:
        """``lab.pub``'s text (signify format)."""
        label = "ephemeral lab key (authenticity not established)" if self.is_ephemeral else "lab"
        return self.public_key.to_signify(f"{label} public key {self.key_id}")

    # --- signing -------------------------------------------------------------------------
    def sign(self, message: bytes) -> bytes:
        """The raw 64-byte Ed25519 signature (``openssl pkeyutl -verify -rawin`` checks it)."""
        return self._key.private.sign(message)

    def sign_detached(
        self, message: bytes, *, file_name: str, public_key_name: str = "lab.pub"
    ) -> str:
        """A signify/minisign signature file for ``message`` (named ``file_name``)."""
        signature = self.sign(message)
        key_kind = "ephemeral" if self.is_ephemeral else "persistent"
        trusted = f"file:{file_name}\tkey:{key_kind}"
        global_sig = self.sign(signature + trusted.encode("utf-8"))
        blob = PKALG + self._key.keynum + signature
        return (
            f"{COMMENT_PREFIX}verify with {public_key_name}\n"
            f"{base64.b64encode(blob).decode('ascii')}\n"
            f"{TRUSTED_PREFIX}{trusted}\n"
            f"{base64.b64encode(global_sig).decode('ascii')}\n"
        )

    def sign_embedded(self, message: bytes, *, public_key_name: str = "lab.pub") -> bytes:
        """signify's embedded signature of ``message``: its two lines, then ``message``."""
        blob = PKALG + self._key.keynum + self.sign(message)
        line = base64.b64encode(blob).decode("ascii")
        return f"{COMMENT_PREFIX}verify with {public_key_name}\n{line}\n".encode() + message


def _is_key_text(value: str) -> bool:
    if value.startswith((COMMENT_PREFIX.strip(), "-----BEGIN")) or "\n" in value:
        return True
    # A lone base64 line of a signify secret key (104 bytes -> 140 characters).
    if len(value) == 140 and not os.path.exists(value):
        try:
            return base64.b64decode(value, validate=True)[:4] == b"EdBK"
        except (binascii.Error, ValueError):
            return False
    return False


@dataclass(frozen=True)
class DetachedSignature:
    """A parsed signature file: signify's two lines, optionally minisign's two more."""

    keynum: bytes
    signature: bytes
    trusted_comment: str | None
    global_signature: bytes | None

    @property
    def key_id(self) -> str:
        return key_id_of(self.keynum)

    @classmethod
    def parse(cls, text: str, *, what: str) -> DetachedSignature:
        _, blob, rest = read_signify_text(text, what=what)
        if len(blob) != SIGNATURE_LEN or blob[:2] != PKALG:
            raise SigningError(
                f"{what} is not a signify Ed25519 signature (expected 74 bytes starting with "
                f"'Ed', found {len(blob)} bytes starting with {blob[:2]!r})."
            )
        trusted: str | None = None
        global_sig: bytes | None = None
        rest = [line for line in rest if line.strip()]
        if rest:
            if len(rest) != 2 or not rest[0].startswith(TRUSTED_PREFIX):
                raise SigningError(
                    f"{what} has extra lines that are not a 'trusted comment:' line followed "
                    "by its base64 signature."
                )
            trusted = rest[0][len(TRUSTED_PREFIX) :]
            try:
                global_sig = base64.b64decode(rest[1].strip(), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise SigningError(
                    f"{what}: the trusted comment's signature is not base64."
                ) from exc
        return cls(blob[2:10], blob[10:], trusted, global_sig)


def verify_detached(
    message: bytes, signature_text: str, public_key: PublicKey, *, what: str
) -> DetachedSignature:
    """Check a signature file against ``public_key``; raise one sentence if it fails.

    The key numbers must agree when ``public_key`` carries one (a PEM key does not), the
    signature must verify, and a trusted comment, when present, must carry a valid signature.
    """
    parsed = DetachedSignature.parse(signature_text, what=what)
    if public_key.keynum is not None and parsed.keynum != public_key.keynum:
        raise SigningError(
            f"{what} was made by key {parsed.key_id}, not by the expected key {public_key.key_id}."
        )
    if not public_key.verify(parsed.signature, message):
        raise SigningError(
            f"{what} does not verify with public key {public_key.key_id}: the signed file "
            "or the signature was changed."
        )
    if parsed.trusted_comment is not None and parsed.global_signature is not None:
        signed = parsed.signature + parsed.trusted_comment.encode("utf-8")
        if not public_key.verify(parsed.global_signature, signed):
            raise SigningError(f"{what}: the trusted comment's signature does not verify.")
    return parsed


def verify_embedded(data: bytes, public_key: PublicKey, *, what: str) -> bytes:
    """Check a signify embedded signature (``signify -C``'s input); return the message.

    Like ``signify``, the first two lines are the signature and everything after them is the
    signed message; raise one sentence if the signature does not verify."""
    parts = data.split(b"\n", 2)
    if len(parts) < 3:
        raise SigningError(
            f"{what} is not a signify embedded signature (two signature lines, then the "
            "signed text)."
        )
    head = (parts[0] + b"\n" + parts[1] + b"\n").decode("ascii", "replace")
    message = parts[2]
    parsed = DetachedSignature.parse(head, what=what)
    if public_key.keynum is not None and parsed.keynum != public_key.keynum:
        raise SigningError(
            f"{what} was made by key {parsed.key_id}, not by the expected key {public_key.key_id}."
        )
    if not public_key.verify(parsed.signature, message):
        raise SigningError(
            f"{what} does not verify with public key {public_key.key_id}: the embedded list "
            "or its signature was changed."
        )
    return message
