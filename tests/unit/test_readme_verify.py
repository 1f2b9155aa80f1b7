"""The README's verification commands run as pasted: every fenced block of "Verifying an
archive without our code" and every inline command there that names the archive
(``run-…``) or pipes into a checker, with ``run-…`` replaced by the real run id and nothing
else changed, against a freshly signed archive, with the trusted key saved where the README
says (``trusted-lab.pub`` beside the archive); and the signature checks fail when that key is
another one. A block this test does not run is listed in ``NOT_RUN_HERE`` with the reason;
a new block nobody classified fails the test."""

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

#: blocks of the section this test does not run, by a phrase each holds, and why
NOT_RUN_HERE = {
    "Envelope.from_dict": "the Python snippet (securesystemslib, in-toto-attestation) runs in "
    "tests/unit/evidence/test_interop_libraries.py::test_the_readme_snippet_runs_as_written",
    "gh attestation verify": "needs GitHub's API (this machine reaches loopback only), an "
    "archive that publish.yml released, and gh 2.49 or later (Debian 12 ships gh 2.23, which "
    "has no attestation command)",
}
#: the blocks run (each found by a phrase it holds) in the archive's directory, one shell,
#: in the README's order: the trusted key's block, then the standard tools' block (which
#: leaves the shell in the unpacked run directory), then the openssl and jq blocks that read
#: files there
RUN_IN_ORDER = ("sha256sum trusted-lab.pub", "tar xzf", "sed -n 2p SHA256SUMS.sig", "jq -r")
#: inline commands of the section that name the archive or pipe into a checker, and the
#: directory each runs in: the archive's ("archive") or the unpacked run's ("run")
INLINE = {
    r"sed -n 's/^SHA256 (SHA256SUMS.gnu) = \(.*\)$/\1  SHA256SUMS.gnu/p' SHA256SUMS"
    " | sha256sum -c": "run",
    "python -m lab verify run-….tar.gz --pubkey trusted-lab.pub": "archive",
    "python -m lab verify run-…/": "archive",
    "python -m lab verify --json run-….tar.gz | jq .ok": "archive",
}


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def fenced_blocks() -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", _section(), re.S)


def readme_blocks() -> list[str]:
    """The fenced blocks this test runs, in the order of ``RUN_IN_ORDER``."""
    blocks = fenced_blocks()
    return [next(b for b in blocks if start in b) for start in RUN_IN_ORDER]


def inline_commands() -> list[str]:
    """The section's inline commands that name the archive or pipe into a checker."""
    prose = re.sub(r"```.*?```", "", _section(), flags=re.S)
    # a span broken over two lines of prose is one command; spaces inside are kept
    spans = [s.replace("\n", " ") for s in re.findall(r"(?<!`)`([^`]+)`(?!`)", prose)]
    commands = ("python -m lab ", "sed ", "sha256sum ", "signify", "minisign ", "openssl ")
    return [s for s in spans if s.startswith(commands) and ("run-…" in s or "| sha256sum" in s)]


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
    for tool in ("signify-openbsd", "minisign", "sha256sum", "openssl", "jq"):
        require(tool, shutil.which(tool) is not None, f"{tool} is not installed")
    keys = generate_keypair(tmp_path / "keys")
    info = make_archive(tmp_path, Signer.from_file(keys.secret))
    # the key as the reader got it from the publisher, saved where the README says
    shutil.copy(keys.public, info.path.parent / "trusted-lab.pub")
    return info.path.parent


def test_every_block_is_run_or_said_why_not() -> None:
    blocks = fenced_blocks()
    run = readme_blocks()
    for block in blocks:
        reasons = [why for phrase, why in NOT_RUN_HERE.items() if phrase in block]
        assert block in run or reasons, f"a README block nobody runs or explains:\n{block}"
    assert len(run) + len(NOT_RUN_HERE) == len(blocks)
    assert sorted(inline_commands()) == sorted(INLINE), "an inline command nobody runs"
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "TRUSTED-lab.pub" not in text
    assert all("trusted-lab.pub" in b for b in run[:2])


def test_readme_commands_run_as_pasted(archive_dir: Path) -> None:
    done = _run("\n".join(readme_blocks()), archive_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "archive checksum signature" in done.stdout + done.stderr
    # each openssl verification printed its verdict
    assert done.stdout.count("Signature Verified Successfully") == 2, done.stdout
    run_dir = archive_dir / "run-1"
    for command, where in INLINE.items():
        done = _run(command, run_dir if where == "run" else archive_dir)
        assert done.returncode == 0, (command, done.stdout + done.stderr)
        if "jq .ok" in command:
            assert done.stdout.strip() == "true", done.stdout


def test_readme_commands_fail_with_another_key(archive_dir: Path, tmp_path: Path) -> None:
    other = generate_keypair(tmp_path / "other")
    shutil.copy(other.public, archive_dir / "trusted-lab.pub")
    first, second = readme_blocks()[:2]
    # each block stops at its first signature check; run from that line on
    signature_lines = [line for line in (first + second).splitlines() if "trusted-lab.pub" in line]
    signature_lines += [c for c in INLINE if "trusted-lab.pub" in c]
    for line in signature_lines:
        if line.startswith("sha256sum"):
            continue  # a fingerprint is printed, not checked, by sha256sum
        setup = "tar xzf run-….tar.gz && cd run-…/\n" if "../trusted" in line else ""
        done = _run(setup + line, archive_dir)
        assert done.returncode != 0, line


def test_the_openssl_lines_fail_on_a_changed_list(archive_dir: Path) -> None:
    """The openssl block checks something: one changed byte in SHA256SUMS and it refuses."""
    openssl = readme_blocks()[2]
    assert _run("tar xzf run-….tar.gz", archive_dir).returncode == 0
    sums = archive_dir / "run-1" / "SHA256SUMS"
    data = bytearray(sums.read_bytes())
    data[10] ^= 0x01
    sums.write_bytes(bytes(data))
    done = _run(openssl, archive_dir / "run-1")
    assert done.returncode != 0, done.stdout + done.stderr
