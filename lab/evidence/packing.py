"""The archive's tarball, packed in segments so that most of it can be compressed early.

A run's last steps are: the PDF (drawn by another process), then the checksums, the
signatures, the provenance and the archive. Compressing the archive (about 1.4 MB for a
default run, 20 MB for a traced one) took about 18 ms of the lab's own process after the
PDF existed, while that process had waited on the PDF with nothing to do. Here the tar
stream is cut, at fixed member boundaries, into segments, and each segment is its own gzip
member (RFC 1952 allows any number, one after another; ``gzip -d``, ``tar -xzf``, bsdtar
and Python's ``gzip`` read them as one stream). A segment made only of files that exist
before the PDF is finished (every file but ``report.pdf`` and the files the archive writer
generates: ``LATE``) can be compressed by :meth:`Packer.prepare` while the PDF is drawn; the
rest is compressed by :meth:`Packer.build`.

Where the segments are cut depends only on the member names, never on what was prepared or
when: the same files give the same bytes whether or not ``prepare`` ran (and a file that
changed after ``prepare``, seen by its size, modification time or inode, has its segment
compressed again). ``tests/unit/evidence/test_packing.py`` checks both.

    packer = Packer(run_dir, epoch=started)
    packer.prepare()                               # beside the PDF
    ...                                            # report.pdf, SHA256SUMS, signatures
    sha = packer.build(run_dir.parent / f"{run_dir.name}.tar.gz", files)
"""

from __future__ import annotations

import hashlib
import os
import struct
import tarfile
import zlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

#: the run files written after the PDF is handed to its drawer: the PDF itself, and what
#: the archive writer generates (lab.evidence.archive.GENERATED, repeated here so that this
#: module stands alone; tests/unit/evidence/test_packing.py holds the two equal)
LATE = frozenset(
    {
        "report.pdf",
        "SHA256SUMS",
        "SHA256SUMS.gnu",
        "SHA256SUMS.sig",
        "SHA256SUMS.signify",
        "lab.pub",
        "lab.pub.pem",
        "provenance.intoto.jsonl",
    }
)
#: zlib's own default: a default run's archive is 2 % larger than at level 9 and packs 2.7
#: times faster (docs/performance.md)
LEVEL = 6
#: a gzip member's header: no file name, mtime 0, no extra flags, OS "unknown" (what
#: ``gzip.GzipFile(filename="", mtime=0)`` writes): nothing of the host in it
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_BLOCK = tarfile.BLOCKSIZE
_RECORD = tarfile.RECORDSIZE
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    """One tar member: a directory or a regular file, by its run-relative path."""

    rel: str
    directory: bool


#: what a prepared segment was made from: each file's (path, size, mtime_ns, inode)
Fingerprint = tuple[tuple[str, int, int, int], ...]


def entries_of(files: Collection[str]) -> list[Entry]:
    """Every member of the tarball in its order: the top directory, then each file and each
    directory above one, sorted by path components."""
    dirs = {""}
    for rel in files:
        dirs.update(str(parent) for parent in PurePosixPath(rel).parents if str(parent) != ".")
    dirs.discard(".")
    items = [Entry(rel, True) for rel in dirs] + [Entry(rel, False) for rel in files]
    return sorted(items, key=lambda e: PurePosixPath(e.rel).parts)


def segments(entries: list[Entry]) -> list[list[Entry]]:
    """``entries`` cut into runs: each run is all late files or all others (directories join
    the run they fall in). A function of the names alone."""
    out: list[list[Entry]] = []
    current: list[Entry] = []
    late_run: bool | None = None
    for entry in entries:
        late = not entry.directory and entry.rel in LATE
        if current and not entry.directory and late != late_run and late_run is not None:
            out.append(current)
            current = []
        if not entry.directory:
            late_run = late
        current.append(entry)
    if current:
        out.append(current)
    return out


class Packer:
    """One run directory's tarball: ``prepare`` (optional, any number of times) compresses
    the segments without a late file; ``build`` writes the whole archive."""

    def __init__(self, run_dir: Path, *, epoch: int) -> None:
        self.run_dir = run_dir
        self.epoch = epoch
        self._ready: dict[tuple[Entry, ...], tuple[Fingerprint, bytes, int]] = {}

    def prepare(self, files: Collection[str]) -> int:
        """Compress every segment of ``files`` (run-relative, as ``collect_files`` lists
        them) that holds no late file; returns how many. The late files need not exist yet:
        they only cut the segments."""
        done = 0
        for segment in segments(entries_of(set(files) | LATE)):
            if any(not e.directory and e.rel in LATE for e in segment):
                continue
            key = tuple(segment)
            if key not in self._ready:
                fingerprint = self._fingerprint(segment)
                self._ready[key] = (fingerprint, *self._compress(self._tar_bytes(segment)))
                done += 1
        return done

    def build(self, dest: Path, files: Collection[str]) -> str:
        """Write ``dest`` (through ``dest.partial``); return its SHA-256 (hex)."""
        tmp = dest.with_name(dest.name + ".partial")
        digest = hashlib.sha256()
        offset = 0
        with open(tmp, "wb") as out:
            for segment in segments(entries_of(files)):
                ready = self._ready.get(tuple(segment))
                if ready is not None and ready[0] == self._fingerprint(segment):
                    blob, size = ready[1], ready[2]
                else:
                    blob, size = self._compress(self._tar_bytes(segment))
                out.write(blob)
                digest.update(blob)
                offset += size
            # the tar's end, its own member: two zero blocks, then zeros to a whole record
            end = 2 * _BLOCK
            end += -(offset + end) % _RECORD
            blob, _ = self._compress(iter([b"\0" * end]))
            out.write(blob)
            digest.update(blob)
        os.replace(tmp, dest)
        return digest.hexdigest()

    def _fingerprint(self, segment: list[Entry]) -> Fingerprint:
        found = []
        for entry in segment:
            if not entry.directory:
                st = (self.run_dir / entry.rel).stat()
                found.append((entry.rel, st.st_size, st.st_mtime_ns, st.st_ino))
        return tuple(found)

    @staticmethod
    def _compress(stream: Iterator[bytes]) -> tuple[bytes, int]:
        """One gzip member holding ``stream``, and the stream's length."""
        deflate = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
        crc = 0
        size = 0
        pieces = [_GZIP_HEADER]
        for raw in stream:
            crc = zlib.crc32(raw, crc)
            size += len(raw)
            pieces.append(deflate.compress(raw))
        pieces.append(deflate.flush())
        pieces.append(struct.pack("<II", crc, size & 0xFFFFFFFF))
        return b"".join(pieces), size

    def _tar_bytes(self, segment: list[Entry]) -> Iterator[bytes]:
        """The tar stream of ``segment``'s members, as ``tarfile`` writes them (PAX format,
        mtime ``epoch``, uid/gid 0, no owner names, modes 0644/0755)."""
        top = self.run_dir.name
        for entry in segment:
            name = f"{top}/{entry.rel}" if entry.rel else top
            if entry.directory:
                header = _tarinfo(name, directory=True, size=0, executable=False, epoch=self.epoch)
                buf = header.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
                yield buf
                continue
            path = self.run_dir / entry.rel
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                info = _tarinfo(
                    name,
                    directory=False,
                    size=st.st_size,
                    executable=bool(st.st_mode & 0o111),
                    epoch=self.epoch,
                )
                buf = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
                yield buf
                left = st.st_size
                while left > 0:
                    chunk = fh.read(min(_CHUNK, left))
                    if not chunk:
                        raise OSError(f"{path} became shorter while it was packed")
                    left -= len(chunk)
                    yield chunk
            if st.st_size % _BLOCK:
                yield b"\0" * (_BLOCK - st.st_size % _BLOCK)


def _tarinfo(
    name: str, *, directory: bool, size: int, executable: bool, epoch: int
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    info.size = 0 if directory else size
    info.mode = 0o755 if (directory or executable) else 0o644
    info.mtime = epoch
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
