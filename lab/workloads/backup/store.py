"""The receiver's store: one saved backup file, replaced by one atomic rename.

    store = Store.open(store_dir)         # removes leftover temporary files, hashes the backup
    store.digest                          # SHA-256 of the saved backup, or None
    fd, tmp = store.new_upload(conn=3)    # write the payload to fd (validated by the caller)
    store.commit(fd, tmp, digest)         # fdatasync, rename over the backup, fsync the directory
    saved_backup(store_dir)               # the saved backup's path, or None (for the check)

The saved digest is never stored beside the file: it is computed from the file itself when
the store is opened and set in memory only after a commit's rename. A crash at any step of a
commit therefore leaves one file whose digest a restarted receiver derives from its content:
the old backup (crash before the rename) or the new one (after it), never a mix.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

BACKUP_NAME = "backup.bin"
#: temporary files of uploads and preloads; anything matching is a leftover at start
TEMP_GLOBS = (".upload-*.tmp", ".preload.tmp")
#: files of the previous layout (a digest file beside the backup), removed at start
LEGACY_NAMES = ("backup.sha256", ".digest.tmp")
_OPEN_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def saved_backup(store_dir: Path) -> Path | None:
    """The path of the currently committed backup, or ``None`` when nothing is committed.

    Only a regular file counts (a symlink planted in the store is not a backup)."""
    path = store_dir / BACKUP_NAME
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    return path if stat.S_ISREG(mode) else None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


@dataclass
class Store:
    directory: Path
    digest: str | None
    #: what opening removed: leftovers of uploads interrupted by a kill or a crash
    removed: list[str] = field(default_factory=list)
    removed_bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, directory: Path) -> Store:
        directory.mkdir(parents=True, exist_ok=True)
        store = cls(directory=directory, digest=None)
        leftovers = {p for pattern in TEMP_GLOBS for p in directory.glob(pattern)}
        leftovers |= {directory / n for n in LEGACY_NAMES if (directory / n).exists()}
        for path in sorted(leftovers):
            store.removed_bytes += path.lstat().st_size
            store.removed.append(path.name)
            path.unlink()
        backup = saved_backup(directory)
        store.digest = sha256_of(backup) if backup is not None else None
        return store

    def new_upload(self, conn: int | str) -> tuple[int, Path]:
        """A fresh temporary file in the store (same file system, so rename is atomic)."""
        path = self.directory / f".upload-{conn}.tmp"
        try:
            fd = os.open(path, _OPEN_NEW, 0o600)
        except FileExistsError:
            path.unlink()
            fd = os.open(path, _OPEN_NEW, 0o600)
        return fd, path

    def commit(self, fd: int, tmp: Path, digest: str) -> None:
        """Make ``tmp`` (open as ``fd``, whose content has SHA-256 ``digest``) the saved backup.

        One data sync, one rename, one directory sync: the rename is the only step that
        changes what is saved, and the digest in memory changes only after it."""
        with self._lock:
            os.fdatasync(fd)
            os.rename(tmp, self.directory / BACKUP_NAME)
            self.digest = digest
            dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)  # the rename itself survives a crash
            finally:
                os.close(dir_fd)

    def discard(self, fd: int, tmp: Path) -> None:
        os.close(fd)
        tmp.unlink(missing_ok=True)

    def save(self, content: bytes, *, name: str = "preload") -> str:
        """Commit ``content`` directly (the older backup some scenarios start with)."""
        digest = hashlib.sha256(content).hexdigest()
        fd, tmp = self.new_upload(name)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            self.commit(fd, tmp, digest)
        finally:
            os.close(fd)
            tmp.unlink(missing_ok=True)
        return digest
