"""Who and what produced a run: git commit, kernel, CPU, client binary digest, image.

These facts go into ``results.json`` (``environment``), the reports and the provenance.
No host name and no host path is recorded.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

from lab.host import procs
from lab.host.digest import sha256_file

#: written by the lab image (Dockerfile) so a run inside the container knows its identity
IMAGE_MANIFEST_DIR = Path("/usr/share/lab/manifest")


def git_commit(repo: Path) -> str | None:
    """The commit of the lab's own source (``LAB_GIT_COMMIT`` inside the container)."""
    if os.environ.get("LAB_GIT_COMMIT"):
        return os.environ["LAB_GIT_COMMIT"]
    if procs.which("git") is None or not (repo / ".git").exists():
        return None
    try:
        done = procs.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            purpose="git commit of the lab",
            timeout=10,
            accept=(0,),
            capture=True,
        )
    except procs.CommandFailed:
        return None
    text = (done.output or b"").decode().strip()
    return text or None


def git_repository(env: dict[str, str] | None = None) -> str | None:
    """The lab's repository as a URL, when the builder says so: ``LAB_GIT_REPOSITORY``, or
    GitHub Actions' ``GITHUB_SERVER_URL``/``GITHUB_REPOSITORY``. Never ``git remote``: a
    remote URL may carry credentials, and a local clone has no URL a reader could fetch."""
    return _named(env, "LAB_GIT_REPOSITORY", "GITHUB_REPOSITORY")


def builder_id(env: dict[str, str] | None = None) -> str | None:
    """Who ran the lab, as the provenance's ``builder.id``, when the builder says so:
    ``LAB_BUILDER_ID``, or GitHub Actions' workflow (``GITHUB_SERVER_URL`` +
    ``GITHUB_WORKFLOW_REF``: ``https://github.com/o/r/.github/workflows/publish.yml@refs/
    tags/v1``, the form SLSA's GitHub builders use). ``None`` on a developer's machine: the
    statement then names the local builder, which no one but its owner vouches for."""
    return _named(env, "LAB_BUILDER_ID", "GITHUB_WORKFLOW_REF")


def _named(env: dict[str, str] | None, own: str, github_path: str) -> str | None:
    """``own`` when set, else GitHub Actions' server URL joined to ``github_path``'s value."""
    env = dict(os.environ) if env is None else env
    if env.get(own):
        return env[own]
    server, path = env.get("GITHUB_SERVER_URL"), env.get(github_path)
    return f"{server.rstrip('/')}/{path}" if server and path else None


def git_dirty(repo: Path) -> bool | None:
    if procs.which("git") is None or not (repo / ".git").exists():
        return None
    try:
        done = procs.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            purpose="git working-tree state",
            timeout=10,
            accept=(0,),
            capture=True,
        )
    except procs.CommandFailed:
        return None
    return bool((done.output or b"").strip())


def in_lab_image() -> bool:
    """True inside the lab image (its Dockerfile sets LAB_IN_IMAGE=1 and writes a manifest).
    ``/.dockerenv`` is no evidence: some hosts are themselves containers."""
    return os.environ.get("LAB_IN_IMAGE") == "1" or (IMAGE_MANIFEST_DIR / "client.sha256").exists()


def image_identity() -> dict[str, Any] | None:
    """The lab image's identity when running inside it (see Dockerfile), else None."""
    path = os.environ.get("LAB_IMAGE_IDENTITY")
    if path and Path(path).is_file():
        data: dict[str, Any] = json.loads(Path(path).read_text())
        return data
    manifest = IMAGE_MANIFEST_DIR / "image.json"
    if manifest.is_file():
        found: dict[str, Any] = json.loads(manifest.read_text())
        return found
    return None


def environment(repo: Path, client: Path, facts: dict[str, Any]) -> dict[str, Any]:
    """The run's identity; ``facts`` are doctor's (CPU model, tool versions)."""
    uname = platform.uname()
    tool_versions = {k: v for k, v in facts.get("tool_versions", {}).items() if v}
    return {
        "git_commit": git_commit(repo),
        "git_dirty": git_dirty(repo),
        # what `uname -r` prints (docs/build-type.md); the architecture is its own field
        "kernel": uname.release,
        "machine": uname.machine,
        "cpu_model": facts.get("cpu_model"),
        "python": platform.python_version(),
        "client_sha256": sha256_file(client) if client.is_file() else None,
        "client": client.name,
        "tool_versions": dict(sorted(tool_versions.items())),
        "image": image_identity(),
        "in_container": in_lab_image(),
    }
