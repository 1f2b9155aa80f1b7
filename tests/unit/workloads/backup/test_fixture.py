from __future__ import annotations

import hashlib
from pathlib import Path

from lab.workloads.backup import fixture


def test_same_seed_same_bytes_and_documented_recipe(tmp_path: Path) -> None:
    digest = fixture.write_source(tmp_path / "a", seed="s", size=524_288)
    again = fixture.write_source(tmp_path / "b", seed="s", size=524_288)
    assert digest == again
    recipe = hashlib.shake_256(b"lab-fixture-v1:s").digest(524_288)
    assert hashlib.sha256(recipe).hexdigest() == digest
    assert (tmp_path / "a").stat().st_size == 524_288


def test_different_seeds_and_older_backup_differ() -> None:
    assert fixture.source_bytes("a", 64) != fixture.source_bytes("b", 64)
    older = fixture.older_backup("a", 8192)
    assert len(older) == 8192 and older != fixture.source_bytes("a", 8192)
    assert older[4096:] == fixture.source_bytes("a", 8192)[4096:]
