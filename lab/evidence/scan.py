"""Bounded reading of an evidence archive: one pass over the gzip stream, every tar header
checked against :class:`Limits` before its data is read, nothing written to disk.

    scan = scan_archive(Path("artifacts/r1.tar.gz"), Limits())
    scan.read_error or scan.limit_error     # why reading stopped, or None
    [(m.name, m.kind, m.digest) for m in scan.members]
    scan.metadata["SHA256SUMS"]             # the signing files, kept in memory
    scan_archive(path, Limits(), read={"results.json"}).read["results.json"]  # asked for

A hostile archive can neither write to disk nor exhaust memory: the decompressed stream is
capped, members are hashed in chunks, and only the small signing files are kept (and a
member a caller asks for by name, within ``max_read_size``: the very bytes hashed, so that a
caller that trusts them once verification passes never reads the archive a second time).

    scan = scan_directory(Path("run-1"), Limits())   # an unpacked run directory, in place

reads a directory into the same record without following any symbolic link.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import os
import stat
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from lab.evidence.archive import GENERATED, MAX_PATH_DEPTH, MAX_PATH_LENGTH

MiB = 1 << 20
GiB = 1 << 30
CHUNK = MiB
#: members whose content verification needs in memory: every file the archive writer
#: generates (the lists, signatures, keys and provenance)
METADATA = GENERATED


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Guards against archive bombs; every limit is checked from headers before reading."""

    max_members: int = 100_000
    max_member_size: int = 512 * MiB
    max_total_size: int = 2 * GiB
    #: SHA256SUMS, its signatures, the public keys and the provenance are read into memory
    max_metadata_size: int = 16 * MiB
    #: tar headers, PAX records and end padding allowed beyond the member data: the whole
    #: decompressed stream is capped at ``max_total_size + max_header_bytes``
    max_header_bytes: int = 64 * MiB
    #: one GNU long-name or PAX extended header: refused from the header declaring more,
    #: before tarfile reads it into memory
    max_extended_header: int = 64 * 1024
    #: a member name (after any long-name or PAX path record), and its directory depth
    max_name_length: int = MAX_PATH_LENGTH + 64  # the top directory and its slash
    max_path_depth: int = MAX_PATH_DEPTH + 1
    #: all member names together, and all kept signing files together (the memory budget)
    max_names_total: int = 16 * MiB
    max_metadata_total: int = 48 * MiB
    #: a member a caller asks ``scan_archive`` to read (a kept check's results.json): a larger
    #: one is hashed and checked, and not read
    max_read_size: int = 64 * MiB


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


#: tar headers whose data tarfile reads into memory as one string: GNU long names and
#: links, PAX extended and global headers
_EXTENDED = frozenset(
    {
        tarfile.GNUTYPE_LONGNAME,
        tarfile.GNUTYPE_LONGLINK,
        tarfile.XHDTYPE,
        tarfile.XGLTYPE,
        tarfile.SOLARIS_XHDTYPE,
    }
)
#: extended headers in a row before a member (tarfile recurses once per header)
_MAX_CHAIN = 8


def _bounded_tarinfo(limits: Limits) -> type[tarfile.TarInfo]:
    """A TarInfo that refuses, from its 512-byte header, an extended header larger than
    ``limits.max_extended_header``, a chain of them, or a GNU sparse file, before tarfile
    reads (and recurses into) its data."""

    class Bounded(tarfile.TarInfo):
        def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo | None:
            # tarfile processes each extended header by recursing into the next one
            chain: int = getattr(tarfile_, "_lab_chain", 0)
            if self.type in _EXTENDED:
                if self.size > limits.max_extended_header:
                    raise _Bomb(
                        f"an extended header ({self.name!r}, tar type {self.type!r}) that "
                        f"declares {self.size} bytes (limit {limits.max_extended_header})"
                    )
                if chain >= _MAX_CHAIN:
                    raise _Bomb(f"a chain of more than {_MAX_CHAIN} extended headers")
                tarfile_._lab_chain = chain + 1  # type: ignore[attr-defined]
            else:
                tarfile_._lab_chain = 0  # type: ignore[attr-defined]
                if self.type == tarfile.GNUTYPE_SPARSE:
                    raise _Bomb(
                        f"a GNU sparse file ({self.name[:80]!r}), which a lab run never has"
                    )
            result: tarfile.TarInfo | None = super()._proc_member(tarfile_)  # type: ignore[misc]
            return result

    return Bounded


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
    #: the members asked for by ``scan_archive(read=…)``, by their name under the top directory
    read: dict[str, bytes] = field(default_factory=dict)
    #: bytes of member names and of kept signing files so far (the memory budget)
    names_total: int = 0
    metadata_total: int = 0
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


def scan_archive(path: Path, limits: Limits, read: frozenset[str] = frozenset()) -> Scan:
    """The archive's record; ``read``: names under its top directory whose bytes to keep."""
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
            with tarfile.open(  # type: ignore[call-overload]
                fileobj=reader, mode="r|", tarinfo=_bounded_tarinfo(limits)
            ) as tar:
                for info in tar:
                    if not _scan_member(tar, info, scan, limits, read):
                        return scan
            # The rest of the stream must be tar padding; reading it to the end also makes
            # gzip check its CRC and length, which catches a cut inside the padding.
            while chunk := reader.read(CHUNK):
                if chunk.strip(b"\0"):
                    scan.read_error = "there is data after the end of the tar archive"
                    return scan
    except _Bomb as exc:
        scan.limit_error = (
            f"the archive expands to {exc}"
            if str(exc).startswith("more than")
            else f"the tar stream holds {exc}"
        )
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:
        scan.read_error = _describe_read_error(exc)
    return scan


def _scan_member(
    tar: tarfile.TarFile, info: tarfile.TarInfo, scan: Scan, limits: Limits, read: frozenset[str]
) -> bool:
    """Record one member; False stops the scan (a limit was exceeded)."""
    if not _name_within_limits(info.name, scan, limits):
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
    inside = info.name.partition("/")[2]  # the name under the top directory
    asked = inside in read and inside not in scan.read and info.size <= limits.max_read_size
    digest = hashlib.sha256()
    kept: list[bytes] = []
    while chunk := data.read(CHUNK):
        digest.update(chunk)
        if keep is not None or asked:
            kept.append(chunk)
    member.digest = digest.hexdigest()
    if asked:
        scan.read[inside] = b"".join(kept)
    if keep is not None and keep not in scan.metadata:  # a duplicate is refused by name
        scan.metadata_total += info.size
        if scan.metadata_total > limits.max_metadata_total:
            scan.limit_error = (
                f"the signing files total more than {limits.max_metadata_total} bytes"
            )
            return False
        scan.metadata[keep] = b"".join(kept)
    return True


def _name_within_limits(name: str, scan: Scan, limits: Limits) -> bool:
    """Count, length, depth and total size of member names, checked before anything is
    recorded; False (with ``scan.limit_error``) when one is exceeded."""
    if len(scan.members) >= limits.max_members:
        scan.limit_error = f"more than {limits.max_members} members"
        return False
    if len(name) > limits.max_name_length:
        scan.limit_error = (
            f"a member name of {len(name)} characters ({name[:60]!r}…; limit "
            f"{limits.max_name_length})"
        )
        return False
    if name.count("/") > limits.max_path_depth:
        scan.limit_error = f"member {name[:60]!r}… is more than {limits.max_path_depth} levels deep"
        return False
    scan.names_total += len(name)
    if scan.names_total > limits.max_names_total:
        scan.limit_error = f"member names total more than {limits.max_names_total} bytes"
        return False
    return True


def _kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return f"file type {stat.S_IFMT(mode):o}"


def scan_directory(path: Path, limits: Limits) -> Scan:
    """The same record as :func:`scan_archive`, of an unpacked run directory, read in place.

    Members are named ``<directory name>/<relative path>``. Nothing is followed through a
    symbolic link: every directory is opened relative to its parent's descriptor with
    ``O_NOFOLLOW``, every file with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat``, so
    a link (or a FIFO) swapped in during the walk is recorded as what it is, never read
    through. A symbolic link is recorded as a member of that kind, which verification
    refuses.
    """
    scan = Scan()
    try:
        st = os.lstat(path)
    except OSError as exc:
        scan.read_error = f"it cannot be read ({exc.strerror})"
        return scan
    if stat.S_ISLNK(st.st_mode):
        scan.read_error = "it is a symbolic link, which verification does not follow"
        return scan
    top = Path(os.path.abspath(path)).name
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        scan.read_error = f"it cannot be opened as a directory ({exc.strerror})"
        return scan
    try:
        scan.members.append(Member(top, "directory", 0))
        _walk(fd, top, scan, limits)
    except _Stop:
        pass
    except OSError as exc:
        scan.read_error = f"{exc.filename or top} cannot be read ({exc.strerror})"
    finally:
        os.close(fd)
    return scan


class _Stop(Exception):
    """A limit was exceeded; ``scan.limit_error`` says which."""


def _walk(dir_fd: int, prefix: str, scan: Scan, limits: Limits) -> None:
    with os.scandir(dir_fd) as it:
        names = sorted(entry.name for entry in it)
    for name in names:
        member_name = f"{prefix}/{name}"
        if not _name_within_limits(member_name, scan, limits):
            raise _Stop
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        kind = _kind_of(mode)
        if kind == "directory":
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            child = _open_at(name, dir_fd, flags)
            if child is None:  # replaced by something else since the stat
                scan.members.append(Member(member_name, "symbolic link", 0))
                continue
            scan.members.append(Member(member_name, "directory", 0))
            try:
                _walk(child, member_name, scan, limits)
            finally:
                os.close(child)
            continue
        if kind != "file":
            scan.members.append(Member(member_name, kind, 0))
            continue
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = _open_at(name, dir_fd, flags)
        if fd is None:
            scan.members.append(Member(member_name, "symbolic link", 0))
            continue
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                scan.members.append(Member(member_name, _kind_of(st.st_mode), 0))
                continue
            _read_member(fh, member_name, st.st_size, scan, limits)


def _open_at(name: str, dir_fd: int, flags: int) -> int | None:
    """``openat`` without following a link; None when ``name`` became a link (``ELOOP``) or
    stopped being a directory (``ENOTDIR``)."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return None
        raise


def _read_member(fh: BinaryIO, name: str, size: int, scan: Scan, limits: Limits) -> None:
    member = Member(name, "file", size)
    scan.members.append(member)
    if size > limits.max_member_size:
        scan.limit_error = f"{name} is {size} bytes (limit {limits.max_member_size})"
        raise _Stop
    keep = metadata_name(name)
    if keep is not None and size > limits.max_metadata_size:
        scan.limit_error = f"{name} is larger than {limits.max_metadata_size} bytes"
        raise _Stop
    digest = hashlib.sha256()
    kept: list[bytes] = []
    read = 0
    while chunk := fh.read(CHUNK):
        read += len(chunk)
        if read > size:
            scan.read_error = f"{name} grew while it was read; verify a directory at rest"
            raise _Stop
        if scan.total + read > limits.max_total_size:
            scan.limit_error = f"members total more than {limits.max_total_size} bytes"
            raise _Stop
        digest.update(chunk)
        if keep is not None:
            kept.append(chunk)
    member.size = read
    scan.total += read
    scan.largest = max(scan.largest, read)
    member.digest = digest.hexdigest()
    if keep is not None:
        scan.metadata_total += read
        if scan.metadata_total > limits.max_metadata_total:
            scan.limit_error = (
                f"the signing files total more than {limits.max_metadata_total} bytes"
            )
            raise _Stop
        scan.metadata[keep] = b"".join(kept)
