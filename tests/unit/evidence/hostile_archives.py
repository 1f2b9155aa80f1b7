"""Crafted archives for ``lab verify`` under hostile input (issue 12), generated small.

Each builder writes one ``.tar.gz`` from the good archive of :mod:`test_verify` (or from
nothing) and returns its path; none needs more than a few MiB on disk, however large the
sizes its headers declare (the declared data is zeros or one repeated byte, which gzip
shrinks a thousandfold).
"""

from __future__ import annotations

import hashlib
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from lab.evidence.archive import (
    CHECKSUMS,
    CHECKSUMS_SIG,
    PROVENANCE,
    PUBKEY,
    PUBKEY_PEM,
    UNLISTED,
    render_checksums,
)
from lab.evidence.signing import Signer
from tests.unit.evidence.test_verify import Entry, find, read_entries, rel, write_entries

GiB = 1 << 30
BLOCK = 512


def _header(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.mtime = kind, size, 0o644, 0
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def _gzip_stream(parts: Iterator[bytes], dest: Path) -> Path:
    """Compress ``parts`` in a stream, so a 1 GiB body never sits in memory."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(dest, "wb") as fh:
        for part in parts:
            fh.write(comp.compress(part))
        fh.write(comp.flush())
    return dest


def _repeat(byte: bytes, size: int) -> Iterator[bytes]:
    chunk = byte * (1 << 20)
    while size > 0:
        yield chunk[: min(size, len(chunk))]
        size -= len(chunk)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


def gnu_long_name(dest: Path, size: int = GiB) -> Path:
    """A GNU long-name header declaring ``size`` bytes of name, then a file it names."""

    def parts() -> Iterator[bytes]:
        yield _header("././@LongLink", tarfile.GNUTYPE_LONGNAME, size)
        yield from _repeat(b"a", size - 1)
        yield b"\0" + _padding(size)
        yield _header("run-1/x", tarfile.REGTYPE, 0)
        yield b"\0" * (2 * BLOCK)

    return _gzip_stream(parts(), dest)


def pax_header(dest: Path, size: int = GiB) -> Path:
    """A PAX extended header holding one ``comment`` record of ``size`` bytes."""

    def parts() -> Iterator[bytes]:
        fixed = len(" comment=\n")
        digits = len(str(size))
        body = size - fixed - digits
        yield _header("run-1/PaxHeader", tarfile.XHDTYPE, size)
        yield f"{size} comment=".encode()
        yield from _repeat(b"A", body)
        yield b"\n" + _padding(size)
        yield _header("run-1/x", tarfile.REGTYPE, 0)
        yield b"\0" * (2 * BLOCK)

    return _gzip_stream(parts(), dest)


def resign(entries: list[Entry], signer: Signer, sums: bytes) -> None:
    """Replace SHA256SUMS by ``sums`` and sign it with ``signer`` (an attacker's own key,
    which replaces lab.pub and lab.pub.pem; ``sums`` lists them as they are then)."""
    entries[find(entries, CHECKSUMS)] = (entries[find(entries, CHECKSUMS)][0], sums)
    sig = signer.sign_detached(sums, file_name=CHECKSUMS).encode()
    entries[find(entries, CHECKSUMS_SIG)] = (entries[find(entries, CHECKSUMS_SIG)][0], sig)


def own_keys(entries: list[Entry], signer: Signer) -> None:
    """The attacker's public key in place of lab.pub and lab.pub.pem."""
    for name, data in (
        (PUBKEY, signer.public_key_file().encode()),
        (PUBKEY_PEM, signer.public_key.to_pem()),
    ):
        entries[find(entries, name)] = (entries[find(entries, name)][0], data)


def relist(entries: list[Entry]) -> bytes:
    """SHA256SUMS as it would be written for ``entries``."""
    digests = {
        rel(info): hashlib.sha256(data).hexdigest()
        for info, data in entries
        if data is not None and rel(info) not in UNLISTED
    }
    return render_checksums(digests).encode()


def deep_paths(good: Path, dest: Path, signer: Signer, depth: int = 40_000) -> Path:
    """SHA256SUMS (signed) naming four paths ``depth`` directories deep."""
    entries = read_entries(good)
    own_keys(entries, signer)
    digest = "0" * 64
    lines = "".join(f"SHA256 ({'d/' * depth}f{i}) = {digest}\n" for i in range(4))
    resign(entries, signer, relist(entries) + lines.encode())
    return write_entries(entries, dest)


def deep_provenance(good: Path, dest: Path, signer: Signer | None = None) -> Path:
    """provenance.intoto.jsonl replaced by 200,000 nested ``[``; with ``signer`` the list is
    rewritten to match and re-signed (an attacker's own key)."""
    entries = read_entries(good)
    i = find(entries, PROVENANCE)
    entries[i] = (entries[i][0], b"[" * 200_000 + b"\n")
    if signer is not None:
        own_keys(entries, signer)
        resign(entries, signer, relist(entries))
    return write_entries(entries, dest)


def duplicates(good: Path, dest: Path, count: int = 99_000) -> Path:
    """The good archive followed by ``count`` copies of its lab.pub (the same header and data,
    written as raw blocks so the test builds them in a moment)."""
    entries = read_entries(good)
    info, data = entries[find(entries, "lab.pub")]
    assert data is not None
    block = _header(info.name, tarfile.REGTYPE, len(data)) + data + _padding(len(data))
    raw = bytearray()
    for entry, body in entries:
        if body is not None:
            entry.size = len(body)
        raw += entry.tobuf(format=tarfile.PAX_FORMAT)
        if body is not None:
            raw += body + _padding(len(body))
    raw += block * count + b"\0" * (2 * BLOCK)
    return _gzip_stream(iter([bytes(raw)]), dest)


def renamed_top(good: Path, dest: Path, top: str = "run-forged") -> Path:
    """Every member moved from ``run-1/`` to ``<top>/``, nothing else changed."""
    entries = read_entries(good)
    for info, _ in entries:
        info.name = top + info.name[len("run-1") :]
    return write_entries(entries, dest)


def flipped_in_sums(good: Path, dest: Path, member: str = "results.json") -> Path:
    """One hex digit flipped in SHA256SUMS, past the first 16 of ``member``'s digest."""
    entries = read_entries(good)
    i = find(entries, CHECKSUMS)
    text = (entries[i][1] or b"").decode()
    start = text.index(f"SHA256 ({member}) = ") + len(f"SHA256 ({member}) = ") + 40
    digit = "0" if text[start] != "0" else "1"
    entries[i] = (entries[i][0], (text[:start] + digit + text[start + 1 :]).encode())
    return write_entries(entries, dest)
