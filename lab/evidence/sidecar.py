"""The two files ``lab run`` writes beside an archive: ``<archive>.sha256`` (one GNU
``sha256sum`` line: the archive's digest and name) and ``<archive>.sha256.sig`` (its
signature, signify/minisign format, by the key that signs ``SHA256SUMS``). ``lab verify``
checks them when they lie beside the archive it is given: the digest against the archive's
bytes, the signature against the same key as the archive's own signature.

    sidecar_checks(report, Path("artifacts/run-1.tar.gz"), key)   # adds checks, or none
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from lab.errors import SigningError
from lab.evidence.checks import VerifyReport
from lab.evidence.keys import PublicKey
from lab.evidence.signing import verify_detached

#: a sidecar is one short line; anything longer is not ours
MAX_SIDECAR = 4096
_LINE = re.compile(r"^(?P<hex>[0-9a-f]{64}) [ *](?P<name>[^\n/]+)\n?$")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _read_small(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SIDECAR + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_SIDECAR else None


def sidecar_checks(report: VerifyReport, archive: Path, key: PublicKey | None) -> None:
    """Add the checks of ``archive``'s ``.sha256`` and ``.sha256.sig`` when either lies
    beside it (none when neither does: an archive copied alone is still verifiable)."""
    checksum = archive.with_name(archive.name + ".sha256")
    signature = archive.with_name(checksum.name + ".sig")
    if not checksum.exists() and not signature.exists():
        return
    line = _read_small(checksum) if checksum.exists() else None
    parsed = _LINE.match(line.decode("ascii", "replace")) if line is not None else None
    expected = f"one line '<sha256>  {archive.name}'"
    if parsed is None:
        found = "missing" if not checksum.exists() else "not one sha256sum line"
        report.add(
            "archive checksum file",
            False,
            expected,
            found,
            f"{checksum.name} beside the archive is {found}; it should be {expected}.",
        )
    else:
        actual = _sha256(archive)
        ok = parsed["name"] == archive.name and parsed["hex"] == actual
        report.add(
            "archive checksum file",
            ok,
            f"{checksum.name} names {archive.name} with its SHA-256",
            f"{parsed['name']} {parsed['hex'][:16]}…",
            None
            if ok
            else f"{checksum.name} does not match {archive.name} (its SHA-256 is {actual}): "
            "the archive or its checksum file was changed.",
        )
    if line is None:
        return
    if not signature.exists():
        report.add(
            "archive checksum signature",
            False,
            f"{signature.name} beside {checksum.name}",
            "missing",
            f"{signature.name} is missing beside {checksum.name}; the checksum file is unsigned.",
        )
        return
    text = _read_small(signature)
    if key is None or text is None:
        why = "no public key to check it with" if key is None else "unreadable or too long"
        report.add("archive checksum signature", False, "a valid signature", why)
        return
    try:
        verify_detached(line, text.decode("ascii", "replace"), key, what=signature.name)
    except SigningError as exc:
        report.add("archive checksum signature", False, f"signed by {key.key_id}", "", str(exc))
        return
    report.add(
        "archive checksum signature",
        True,
        f"{checksum.name} signed by {key.key_id}",
        f"verified with {report.key_source}",
    )
