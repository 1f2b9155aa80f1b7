"""The deterministic source file every scenario backs up.

The bytes are SHAKE-256 output over a seed, so any reviewer can regenerate the exact file
with a one-liner (``hashlib.shake_256(b"lab-fixture-v1:" + seed).digest(size)``) and the
same seed always gives the same digest, on any machine.

    path = write_source(state_dir / "source.bin", seed="baseline-1", size=524_288)
"""

from __future__ import annotations

import hashlib
from pathlib import Path

DEFAULT_SIZE = 524_288
#: domain separation so a fixture never collides with another use of the same seed
_PREFIX = b"lab-fixture-v1:"


def source_bytes(seed: str, size: int) -> bytes:
    if size < 0:
        raise ValueError("size must be >= 0")
    return hashlib.shake_256(_PREFIX + seed.encode("utf-8")).digest(size)


def write_source(path: Path, *, seed: str, size: int = DEFAULT_SIZE) -> str:
    """Write the fixture and return its SHA-256 (hex)."""
    data = source_bytes(seed, size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def older_backup(seed: str, size: int) -> bytes:
    """Content of an *older* backup: the same file before a change (it differs from the
    source in its first 4 KiB), used by scenarios that start with a backup already saved."""
    data = bytearray(source_bytes(seed, size))
    stale = hashlib.shake_256(b"lab-older-v1:" + seed.encode("utf-8")).digest(min(4096, size))
    data[: len(stale)] = stale
    return bytes(data)
