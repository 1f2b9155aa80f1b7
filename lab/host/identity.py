"""Who and what produced a run: git commit, kernel, CPU, client binary digest, image.

These facts go into ``results.json`` (``environment``), the reports and the provenance.
No host name and no host path is recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Mapping, Sequence
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


#: builder ids for where the lab ran when no workflow names itself more precisely
KUBERNETES_BUILDER_ID = "urn:execution-evidence-lab:builder:kubernetes:v1"
CI_BUILDER_ID = "urn:execution-evidence-lab:builder:ci:v1"


def builder_id(env: dict[str, str] | None = None) -> str | None:
    """Who ran the lab, as the provenance's ``builder.id``, from where it ran:
    ``LAB_BUILDER_ID`` when the builder names itself; GitHub Actions' workflow
    (``GITHUB_SERVER_URL`` + ``GITHUB_WORKFLOW_REF``: ``https://github.com/o/r/.github/
    workflows/publish.yml@refs/tags/v1``, the form SLSA's GitHub builders use); GitLab CI's
    pipeline (``CI_PIPELINE_URL``); a Kubernetes pod (``KUBERNETES_SERVICE_HOST``, the
    Indexed Job), :data:`KUBERNETES_BUILDER_ID`; another CI (``CI`` set true),
    :data:`CI_BUILDER_ID`. ``None`` on a developer's machine: the statement then names the
    local builder, which no one but its owner vouches for."""
    env = dict(os.environ) if env is None else env
    named = _named(env, "LAB_BUILDER_ID", "GITHUB_WORKFLOW_REF")
    if named is not None:
        return named
    if env.get("GITLAB_CI") and env.get("CI_PIPELINE_URL"):
        return env["CI_PIPELINE_URL"]
    if env.get("KUBERNETES_SERVICE_HOST"):
        return KUBERNETES_BUILDER_ID
    if env.get("CI", "").lower() in ("true", "1", "yes"):
        return CI_BUILDER_ID
    return None


def _named(env: dict[str, str] | None, own: str, github_path: str) -> str | None:
    """``own`` when set, else GitHub Actions' server URL joined to ``github_path``'s value."""
    env = dict(os.environ) if env is None else env
    if env.get(own):
        return env[own]
    server, path = env.get("GITHUB_SERVER_URL"), env.get(github_path)
    return f"{server.rstrip('/')}/{path}" if server and path else None


def git_dirty(repo: Path) -> bool | None:
    """Whether the working tree differs from the commit (tracked files): ``LAB_GIT_DIRTY``
    (``1``/``0``) inside the container, where the host's ``git status`` was read; else
    ``git status``; ``None`` when neither is available."""
    flag = os.environ.get("LAB_GIT_DIRTY")
    if flag in ("0", "1"):
        return flag == "1"
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


def source_state(repo: Path) -> dict[str, Any]:
    """The lab source's ``git_commit`` and ``git_dirty`` (two git commands), read once per
    run: beside its first passes (``lab.pipeline.prepare.setup``), where they cost the run
    nothing, instead of after its last."""
    return {"git_commit": git_commit(repo), "git_dirty": git_dirty(repo)}


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
    """The run's identity; ``facts`` are doctor's (CPU model, tool versions), with the
    source's state under ``source`` when it was read ahead (``source_state``)."""
    uname = platform.uname()
    source = facts.get("source") or source_state(repo)
    tool_versions = {k: v for k, v in facts.get("tool_versions", {}).items() if v}
    # the interpreter running the lab (docs/build-type.md lists Python among the tools)
    tool_versions.setdefault("python", f"Python {platform.python_version()}")
    return {
        "git_commit": source["git_commit"],
        "git_dirty": source["git_dirty"],
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


def chain_id(diff_ids: Sequence[str]) -> str | None:
    """The image's content digest: the OCI image spec's ChainID of its layers' DiffIDs
    (``ChainID(L0) = DiffID(L0)``, ``ChainID(L0..Ln) = sha256(ChainID(L0..Ln-1) + " " +
    DiffID(Ln))``), what ``docker image inspect`` lists as ``RootFS.Layers``. It names the
    filesystem's content alone: two engines that hold the same layers agree on it, where the
    local image ID also hashes the configuration (labels, creation time)."""
    chain: str | None = None
    for diff_id in diff_ids:
        if chain is None:
            chain = diff_id
        else:
            chain = "sha256:" + hashlib.sha256(f"{chain} {diff_id}".encode()).hexdigest()
    return chain


def image_digests(image: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(content digest, local image ID) of an image record (``results.json`` ->
    ``environment.image``). A record written before the two were named apart held the local
    ID twice, as ``id`` and ``digest``: it has no content digest."""
    if not image:
        return None, None
    local = image.get("id")
    content = image.get("content_digest")
    legacy = image.get("digest")
    if content is None and legacy is not None and legacy != local:
        content = legacy
    return (
        str(content) if content else None,
        str(local) if local else None,
    )
