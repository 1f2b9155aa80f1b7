"""SHA-256 of a file, read in 1 MiB chunks: the one digest helper every layer uses (the
verifier, identity, the archive, the shards, the candidate and the campaign).

    sha256_file(Path("results.json"))  # -> "9f86d0...", hex
    manifest_digest({"a.txt": "9f86d0...", "b/c.txt": "..."})  # one digest of many files
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


def manifest_digest(files: dict[str, str]) -> str:
    """The SHA-256 of ``<sha256>  <path>`` lines (``sha256sum``'s), sorted by path: one
    digest of a tree's files (a fixture, the lab's own source)."""
    text = "".join(f"{digest}  {rel}\n" for rel, digest in sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()
