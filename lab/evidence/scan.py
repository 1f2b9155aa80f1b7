"""Bounded reading of an evidence archive: one pass over the gzip stream, every tar header
checked against :class:`Limits` before its data is read, nothing written to disk.

    scan = scan_archive(Path("artifacts/r1.tar.gz"), Limits())
    scan.read_error or scan.limit_error     # why reading stopped, or None
    [(m.name, m.kind, m.digest) for m in scan.members]
    scan.metadata["SHA256SUMS"]             # the signing files, kept in memory

A hostile archive can neither write to disk nor exhaust memory: the decompressed stream is
capped, members are hashed in chunks, and only the small signing files are kept.
"""

from __future__ import annotations

import gzip
import hashlib
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from lab.evidence.archive import (
    CHECKSUMS,
    CHECKSUMS_GNU,
    CHECKSUMS_SIG,
    CHECKSUMS_SIGNIFY,
    PROVENANCE,
    PUBKEY,
    PUBKEY_PEM,
)

MiB = 1 << 20
GiB = 1 << 30
CHUNK = MiB
#: members whose content verification needs in memory
METADATA = (
    CHECKSUMS,
    CHECKSUMS_GNU,
    CHECKSUMS_SIG,
    CHECKSUMS_SIGNIFY,
    PUBKEY,
    PUBKEY_PEM,
    PROVENANCE,
)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Guards against archive bombs; every limit is checked from headers before reading."""

    max_members: int = 100_000
    max_member_size: int = 512 * MiB
    max_total_size: int = 2 * GiB
    #: SHA256SUMS, its signatures, the public keys and the provenance are read into memory
    max_metadata_size: int = 64 * MiB
    #: tar headers, PAX records and end padding allowed beyond the member data: the whole
    #: decompressed stream is capped at ``max_total_size + max_header_bytes``
    max_header_bytes: int = 64 * MiB


class _CappedReader:
    """Counts decompressed bytes and stops at ``cap``: a gzip bomb cannot run unbounded."""

    def __init__(self, inner: gzip.GzipFile, cap: int) -> None:
        self.inner = inner
        self.cap = cap
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = CHUNK
        data = self.inner.read(size)
        self.count += len(data)
        if self.count > self.cap:
            raise _Bomb(f"more than {self.cap} bytes of uncompressed data")
        return data


class _Bomb(Exception):
    pass


@dataclass
class Member:
    name: str
    kind: str
    size: int
    digest: str | None = None


@dataclass
class Scan:
    members: list[Member] = field(default_factory=list)
    metadata: dict[str, bytes] = field(default_factory=dict)
    read_error: str | None = None
    limit_error: str | None = None
    largest: int = 0
    total: int = 0


_KIND = {
    tarfile.REGTYPE: "file",
    tarfile.AREGTYPE: "file",
    tarfile.DIRTYPE: "directory",
    tarfile.SYMTYPE: "symbolic link",
    tarfile.LNKTYPE: "hard link",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "FIFO",
    tarfile.CONTTYPE: "contiguous file",
    tarfile.GNUTYPE_SPARSE: "sparse file",
}


def metadata_name(name: str) -> str | None:
    parts = name.split("/", 1)
    if len(parts) == 2 and parts[1] in METADATA:
        return parts[1]
    return None


def _describe_read_error(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "the compressed stream ends early: the archive was cut short"
    if isinstance(exc, gzip.BadGzipFile):
        return f"it is not gzip data ({exc})"
    if isinstance(exc, zlib.error):
        return f"the compressed data is corrupt ({exc})"
    if isinstance(exc, tarfile.TarError):
        text = str(exc) or type(exc).__name__
        if "unexpected end" in text:
            return "the tar stream ends early: the archive was cut short"
        return f"the tar data is corrupt ({text})"
    return f"{type(exc).__name__}: {exc}"


def scan_archive(path: Path, limits: Limits) -> Scan:
    scan = Scan()
    if not path.is_file():
        scan.read_error = "the file does not exist" if not path.exists() else "not a file"
        return scan
    if path.stat().st_size == 0:
        scan.read_error = "the file is empty"
        return scan
    cap = limits.max_total_size + limits.max_header_bytes
    try:
        with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            reader = _CappedReader(gz, cap)
            with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
                for info in tar:
                    if not _scan_member(tar, info, scan, limits):
                        return scan
            # The rest of the stream must be tar padding; reading it to the end also makes
            # gzip check its CRC and length, which catches a cut inside the padding.
            while chunk := reader.read(CHUNK):
                if chunk.strip(b"\0"):
                    scan.read_error = "there is data after the end of the tar archive"
                    return scan
    except _Bomb as exc:
        scan.limit_error = f"the archive expands to {exc}"
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:
        scan.read_error = _describe_read_error(exc)
    return scan


def _scan_member(tar: tarfile.TarFile, info: tarfile.TarInfo, scan: Scan, limits: Limits) -> bool:
    """Record one member; False stops the scan (a limit was exceeded)."""
    if len(scan.members) >= limits.max_members:
        scan.limit_error = f"more than {limits.max_members} members"
        return False
    kind = _KIND.get(info.type, f"tar type {info.type!r}")
    member = Member(info.name, kind, info.size)
    scan.members.append(member)
    if kind != "file":
        return True
    if info.size > limits.max_member_size:
        scan.limit_error = (
            f"{info.name} declares {info.size} bytes (limit {limits.max_member_size})"
        )
        return False
    scan.total += info.size
    scan.largest = max(scan.largest, info.size)
    if scan.total > limits.max_total_size:
        scan.limit_error = f"members total more than {limits.max_total_size} bytes"
        return False
    keep = metadata_name(info.name)
    if keep is not None and info.size > limits.max_metadata_size:
        scan.limit_error = f"{info.name} is larger than {limits.max_metadata_size} bytes"
        return False
    data = tar.extractfile(info)
    if data is None:  # pragma: no cover - regular files always have data
        return True
    digest = hashlib.sha256()
    kept: list[bytes] = []
    while chunk := data.read(CHUNK):
        digest.update(chunk)
        if keep is not None:
            kept.append(chunk)
    member.digest = digest.hexdigest()
    if keep is not None and not any(m.name == info.name for m in scan.members[:-1]):
        scan.metadata[keep] = b"".join(kept)
    return True
