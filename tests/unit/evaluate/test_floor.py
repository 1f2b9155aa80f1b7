"""The instrument floor's reference uploader: it builds, it is a correct protocol-v1 client
(the receiver commits exactly the source, then answers YES to the unchanged second run), and
a build that cannot happen is a recorded reason, never an error or a zero."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lab.evaluate import floor
from lab.host.digest import sha256_file
from lab.host.procs import run
from lab.workloads.backup.fixture import write_source
from lab.workloads.backup.receiver import Receiver
from tests.conftest import require


def test_the_reference_uploader_backs_up_and_then_asks_only(tmp_path: Path) -> None:
    require("cc", shutil.which("cc") is not None, "no cc on PATH")
    built = floor.build(tmp_path / "floor", log=None)
    assert built.binary is not None, built.reason
    identity = built.describe()
    assert identity["source_sha256"] == sha256_file(floor.SOURCE)
    assert identity["binary_sha256"] == sha256_file(built.binary)
    source = tmp_path / "source.bin"
    write_source(source, seed="floor", size=3 * 1024 * 1024 + 7)
    with Receiver.serving(tmp_path / "store", tmp_path / "rx.jsonl") as rx:
        for _ in range(2):
            done = run(
                [str(built.binary), "--source", str(source), "--receiver", rx.address],
                purpose="reference uploader",
                capture=True,
                timeout=30.0,
            )
            assert b'"status":"ok"' in done.output
        rx.wait_idle()
    records = (tmp_path / "rx.jsonl").read_text()
    assert records.count('"committed"') >= 1
    assert records.count('"YES"') == 1  # the second run only asked
    saved = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert [sha256_file(p) for p in saved] == [sha256_file(source)]


def test_no_compiler_is_a_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    built = floor.build(tmp_path / "floor", log=None)
    assert built.binary is None
    assert built.reason == "no C compiler (cc) on PATH to build the reference"
    assert built.describe()["binary_sha256"] is None
