"""The signing key every merge test's shards are signed with (and LAB_SIGNING_KEY set to it,
so the merged run is signed by it too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.evidence.keys import generate_keypair
from lab.evidence.signing import Signer


@pytest.fixture
def key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Signer, Path]:
    paths = generate_keypair(tmp_path / "keys")
    monkeypatch.setenv("LAB_SIGNING_KEY", str(paths.secret))
    return Signer.from_file(paths.secret), paths.public
