"""User-facing errors end in one sentence naming the file or key, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def lab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_corrupted_scenario_file_gives_one_sentence(tmp_path: Path) -> None:
    good = (ROOT / "scenarios" / "baseline.yaml").read_text()
    (tmp_path / "baseline.yaml").write_text(good.replace("invocations: 2", "invocations: [2"))
    done = lab("run", "baseline", "--scenario-dir", str(tmp_path), "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "baseline.yaml" in lines[0] and "YAML" in lines[0]
    assert not (tmp_path / "o").exists()  # nothing half-written


def test_unknown_scenario_and_bad_option() -> None:
    done = lab("run", "no-such-scenario", "--no-archive")
    assert done.returncode == 2 and "no such scenario; known:" in done.stderr
    done = lab("run", "--all", "--collector", "dtrace")
    assert done.returncode == 2 and "invalid choice" in done.stderr


def test_missing_client_binary(tmp_path: Path) -> None:
    done = lab(
        "run",
        "baseline",
        "--client",
        str(tmp_path / "nope"),
        "--no-archive",
        "--out",
        str(tmp_path),
    )
    assert done.returncode == 2
    assert "make -C native" in done.stderr and "Traceback" not in done.stderr


def test_tampered_archive_is_one_sentence(tmp_path: Path) -> None:
    bogus = tmp_path / "run.tar.gz"
    bogus.write_bytes(b"\x1f\x8b\x08\x00not really gzip")
    done = lab("verify", str(bogus))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "run.tar.gz" in done.stderr
