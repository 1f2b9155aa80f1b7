"""The provenance's DSSE envelope checked without our code, exactly as the README shows:
jq and base64 take it apart, ``openssl pkeyutl -verify`` checks the Ed25519 signature over
``PAE(payloadType, payload)`` with ``lab.pub.pem``, ``sha256sum -c`` checks every subject.
A missing tool skips and names itself (``tests.conftest.require``)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest

from lab.evidence.archive import PROVENANCE
from tests.conftest import ROOT
from tests.unit.evidence.test_interop import tool, unpacked  # noqa: F401 (a fixture)

MARKER = "# the provenance's DSSE signature, with openssl and lab.pub.pem"


def readme_snippet(scratch: Path) -> str:
    """The README's code block that starts with MARKER, its /tmp/ paths moved to ``scratch``."""
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)
    block = next((b for b in blocks if b.startswith(MARKER)), None)
    assert block is not None, f"README.md has no ```sh block starting with {MARKER!r}"
    return block.replace("/tmp/", f"{scratch}/")


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def tools() -> None:
    for name in ("jq", "openssl", "sha256sum", "base64"):
        tool(name, name)


def test_the_readme_commands_verify_the_envelope(
    tools: None,
    unpacked: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    done = _run(readme_snippet(tmp_path), unpacked)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Signature Verified Successfully" in done.stdout


def test_they_catch_a_changed_statement(
    tools: None,
    unpacked: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    envelope = json.loads((unpacked / PROVENANCE).read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["runDetails"]["metadata"]["invocationId"] = "someone-else"
    body = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    envelope["payload"] = base64.b64encode(body).decode()
    (unpacked / PROVENANCE).write_text(json.dumps(envelope) + "\n")
    done = _run(readme_snippet(tmp_path), unpacked)
    assert done.returncode != 0 and "Signature Verification Failure" in done.stdout + done.stderr


def test_they_catch_a_changed_subject(
    tools: None,
    unpacked: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    (unpacked / "results.json").write_text("{}")
    done = _run(readme_snippet(tmp_path), unpacked)
    assert done.returncode != 0 and "results.json: FAILED" in done.stdout + done.stderr
