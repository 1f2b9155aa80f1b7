"""``keys generate`` under hostile conditions (issue 12): half a pair on disk, a planted
symlink, an impossible output directory, a failure half-way."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lab.errors import SigningError
from lab.evidence import keys
from lab.evidence.keys import PublicKey, SecretKey, generate_keypair
from tests.conftest import ROOT


def test_public_key_without_secret_key_is_refused_and_nothing_written(tmp_path: Path) -> None:
    pub = tmp_path / "lab.pub"
    pub.write_text("an older public key\n")
    # was: wrote a new lab.sec, then failed on lab.pub: a mismatched pair
    with pytest.raises(SigningError, match=r"already exists \(lab\.pub\)"):
        generate_keypair(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.pub"]
    assert pub.read_text() == "an older public key\n"


def test_force_replaces_a_symlinked_secret_key_without_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("not yours\n")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "lab.sec").symlink_to(victim)
    paths = generate_keypair(tmp_path / "keys", force=True)
    assert victim.read_text() == "not yours\n"
    info = paths.secret.lstat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    secret = SecretKey.parse(paths.secret.read_bytes(), what="lab.sec")
    assert secret.public.raw == PublicKey.load(paths.public).raw


def test_secret_key_is_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        paths = generate_keypair(tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(paths.secret.stat().st_mode) == 0o600


def test_a_failure_half_way_leaves_no_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = keys._write_temp
    calls = []

    def failing(path: Path, data: bytes, mode: int) -> Path:
        calls.append(path.name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(path, data, mode)

    monkeypatch.setattr(keys, "_write_temp", failing)
    with pytest.raises(SigningError, match="No space left"):
        generate_keypair(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("out", ["/proc/x", "/etc/passwd/x"])
def test_impossible_out_directory_is_one_sentence(out: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lab", "keys", "generate", "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and out in lines[0], done.stderr
