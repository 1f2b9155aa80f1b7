"""SHA-256 of a file, read in 1 MiB chunks: the one digest helper every layer uses (the
verifier, identity, the archive, the shards, the candidate and the campaign).

    sha256_file(Path("results.json"))  # -> "9f86d0...", hex
"""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
