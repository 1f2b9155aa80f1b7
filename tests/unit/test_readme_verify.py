"""The README's verification commands run as pasted: the first two ``sh`` blocks of
"Verifying an archive without our code" (``run-…`` replaced by the real run id, nothing
else changed) against a freshly signed archive, with the trusted key saved where the README says
(``trusted-lab.pub`` beside the archive); and they fail when that key is another one."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.evidence.keys import generate_keypair
from lab.evidence.signing import Signer
from tests.conftest import ROOT, require
from tests.unit.evidence.test_verify import make_archive

SECTION = "## Verifying an archive without our code"


def readme_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    # the first two: the trusted key's block and the standard tools' block (the openssl,
    # jq and gh blocks after them are not run here)
    return re.findall(r"```sh\n(.*?)```", section, re.S)[:2]


def _run(block: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),  # this checkout's lab, whatever is installed
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    script = "set -euo pipefail\n" + block.replace("run-…", "run-1")
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def archive_dir(tmp_path: Path) -> Path:
    for tool in ("signify-openbsd", "minisign", "sha256sum"):
        require(tool, shutil.which(tool) is not None, f"{tool} is not installed")
    keys = generate_keypair(tmp_path / "keys")
    info = make_archive(tmp_path, Signer.from_file(keys.secret))
    # the key as the reader got it from the publisher, saved where the README says
    shutil.copy(keys.public, info.path.parent / "trusted-lab.pub")
    return info.path.parent


def test_readme_has_the_two_blocks_and_no_placeholder_key() -> None:
    blocks = readme_blocks()
    assert len(blocks) == 2
    assert "TRUSTED-lab.pub" not in (ROOT / "README.md").read_text(encoding="utf-8")
    assert all("trusted-lab.pub" in b for b in blocks)


def test_readme_commands_run_as_pasted(archive_dir: Path) -> None:
    first, second = readme_blocks()
    done = _run(first, archive_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "archive checksum signature" in done.stdout + done.stderr
    done = _run(second, archive_dir)
    assert done.returncode == 0, done.stdout + done.stderr


def test_readme_commands_fail_with_another_key(archive_dir: Path, tmp_path: Path) -> None:
    other = generate_keypair(tmp_path / "other")
    shutil.copy(other.public, archive_dir / "trusted-lab.pub")
    first, second = readme_blocks()
    # each block stops at its first signature check; run from that line on
    signature_lines = [line for line in (first + second).splitlines() if "trusted-lab.pub" in line]
    for line in signature_lines:
        if line.startswith("sha256sum"):
            continue  # a fingerprint is printed, not checked, by sha256sum
        setup = "tar xzf run-….tar.gz && cd run-…/\n" if "../trusted" in line else ""
        done = _run(setup + line, archive_dir)
        assert done.returncode != 0, line
