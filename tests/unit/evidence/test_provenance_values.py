"""The provenance's values: a real URI or none, ``uname -r``, the lab version in
``builder.version``, no field twice; ``results.schema.json`` inside every archive, covered
by SHA256SUMS and named by ``results.json``'s ``$schema``."""

from __future__ import annotations

import base64
import json
import platform
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lab import __version__
from lab.evidence.provenance import (
    BUILD_TYPE,
    LOCAL_BUILDER_ID,
    ProvenanceInputs,
    build_statement,
    is_uri,
    source_uri,
)
from lab.evidence.verify import inspect_archive
from lab.host import identity
from tests.conftest import ROOT

COMMIT = "b" * 40


def _inputs(**changes: Any) -> ProvenanceInputs:
    values: dict[str, Any] = {
        "run_id": "run-1",
        "started_on": "2026-01-01T00:00:00Z",
        "finished_on": "2026-01-01T00:05:00Z",
        "scenarios": ["baseline", "hash-storm"],
        "options": {
            "collector": "none",
            "scenarios": ["baseline", "hash-storm"],
            "lab_version": __version__,
            "repetitions": 1,
        },
        "git_commit": COMMIT,
        "git_dirty": False,
        "client_path": "backup-client",
        "client_digest": "c" * 64,
        "image_digest": "sha256:" + "a" * 64,
        "kernel": "6.18.0",
        "lab_version": __version__,
    }
    values.update(changes)
    return ProvenanceInputs(**values)


@pytest.mark.parametrize(
    ("repository", "uri"),
    [
        ("https://github.com/owner/lab", f"git+https://github.com/owner/lab@{COMMIT}"),
        ("git+https://example.org/lab.git", f"git+https://example.org/lab.git@{COMMIT}"),
        (None, None),
        ("", None),
        ("git+local", None),  # what the lab wrote before: no URI at all
        ("/srv/git/lab", None),
    ],
)
def test_the_source_uri_is_a_uri_or_absent(repository: str | None, uri: str | None) -> None:
    assert source_uri(repository, COMMIT) == uri
    source = next(
        d
        for d in build_statement({}, _inputs(git_repository=repository))["predicate"][
            "buildDefinition"
        ]["resolvedDependencies"]
        if d["name"] == "source"
    )
    assert source.get("uri") == uri and source["digest"] == {"gitCommit": COMMIT}


def test_every_uri_in_the_statement_is_one() -> None:
    statement = build_statement({}, _inputs(git_repository=None))
    deps = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    uris = [d["uri"] for d in deps if "uri" in d]
    assert uris and all(is_uri(u) for u in uris)
    assert not any(u.startswith("git+local") for u in uris)


def _count_key(value: Any, key: str) -> int:
    if isinstance(value, dict):
        return sum((k == key) + _count_key(v, key) for k, v in value.items())
    if isinstance(value, list):
        return sum(_count_key(v, key) for v in value)
    return 0


def test_no_field_appears_twice_and_the_version_is_the_builders() -> None:
    statement = build_statement({}, _inputs())
    build = statement["predicate"]["buildDefinition"]
    assert _count_key(statement, "scenarios") == 1
    assert build["externalParameters"]["scenarios"] == ["baseline", "hash-storm"]
    assert "lab_version" not in build["externalParameters"]["options"]
    assert build["externalParameters"]["options"] == {"collector": "none", "repetitions": 1}
    assert statement["predicate"]["runDetails"]["builder"]["version"] == {"lab": __version__}
    assert build["internalParameters"]["kernel"] == "6.18.0"


def test_the_kernel_is_uname_r(tmp_path: Path) -> None:
    env = identity.environment(tmp_path, tmp_path / "no-client", {})
    assert env["kernel"] == platform.release()
    assert env["machine"] == platform.machine()
    if shutil.which("uname"):
        uname_r = subprocess.run(["uname", "-r"], capture_output=True, text=True, check=True)
        assert env["kernel"] == uname_r.stdout.strip()


def test_the_source_state_read_ahead_is_the_one_recorded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A run reads its git state beside its first passes (``identity.source_state`` on the
    pipeline's ``later``); the environment then records that, running no git at its end."""

    def no_git(repo: Path) -> None:
        raise AssertionError("git was run again at the end of the run")

    monkeypatch.setattr(identity, "git_commit", no_git)
    monkeypatch.setattr(identity, "git_dirty", no_git)
    ahead = {"source": {"git_commit": "a" * 40, "git_dirty": True}}
    env = identity.environment(tmp_path, tmp_path / "no-client", ahead)
    assert (env["git_commit"], env["git_dirty"]) == ("a" * 40, True)


def test_the_source_state_is_the_repository_s(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("LAB_GIT_COMMIT", raising=False)
    monkeypatch.delenv("LAB_GIT_DIRTY", raising=False)
    assert identity.source_state(tmp_path) == {"git_commit": None, "git_dirty": None}
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "tracked").write_text("one\n")
    subprocess.run([*git, "add", "tracked"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert identity.source_state(tmp_path) == {"git_commit": head, "git_dirty": False}
    (tmp_path / "tracked").write_text("two\n")
    assert identity.source_state(tmp_path) == {"git_commit": head, "git_dirty": True}


def test_the_repository_comes_from_the_builder_never_from_git_remote() -> None:
    github = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "owner/lab"}
    assert identity.git_repository(github) == "https://github.com/owner/lab"
    assert identity.git_repository({"LAB_GIT_REPOSITORY": "https://example.org/lab"}) == (
        "https://example.org/lab"
    )
    assert identity.git_repository({}) is None


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run")
    argv = ["run", "baseline", "--sandbox", "off", "--collector", "none", "--packets", "off"]
    done = subprocess.run(
        [sys.executable, "-m", "lab", *argv, "--json", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["archive"]["path"])


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {
            m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def test_the_archive_ships_the_schema_its_results_name(archive: Path) -> None:
    members = _members(archive)
    results = json.loads(members["results.json"])
    assert results["$schema"] == "results.schema.json"
    shipped = members["results.schema.json"]
    assert shipped == (ROOT / "lab" / "schemas" / "results.schema.json").read_bytes()
    jsonschema.Draft202012Validator(json.loads(shipped)).validate(results)
    assert "SHA256 (results.schema.json) = " in members["SHA256SUMS"].decode()
    envelope = json.loads(members["provenance.intoto.jsonl"])
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert "results.schema.json" in {s["name"] for s in statement["subject"]}
    build = statement["predicate"]["buildDefinition"]
    assert build["internalParameters"]["kernel"] == platform.release()
    assert _count_key(statement, "scenarios") == 1
    for dep in build["resolvedDependencies"]:
        assert "uri" not in dep or is_uri(dep["uri"])
    report = inspect_archive(archive, pubkey=None)
    assert report.ok and any(c.name == "results schema" and c.passed for c in report.checks)


def test_verify_refuses_a_run_without_its_schema(archive: Path, tmp_path: Path) -> None:
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(tmp_path, filter="data")
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    (run_dir / "results.schema.json").unlink()
    report = inspect_archive(run_dir, pubkey=None)
    failed = {c.name: c for c in report.checks if not c.passed}
    assert "results schema" in failed
    assert "results.schema.json" in (failed["results schema"].message or "")


def test_the_builder_is_the_workflow_in_ci_else_the_local_urn() -> None:
    github = {
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_WORKFLOW_REF": "owner/lab/.github/workflows/publish.yml@refs/tags/v1",
    }
    assert identity.builder_id(github) == (
        "https://github.com/owner/lab/.github/workflows/publish.yml@refs/tags/v1"
    )
    assert identity.builder_id({**github, "LAB_BUILDER_ID": "urn:x:y"}) == "urn:x:y"
    assert identity.builder_id({"GITHUB_SERVER_URL": "https://github.com"}) is None
    assert identity.builder_id({}) is None
    statement = build_statement({}, _inputs())
    assert statement["predicate"]["runDetails"]["builder"]["id"] == LOCAL_BUILDER_ID


def test_no_identifier_names_a_host_the_project_does_not_serve() -> None:
    statement = build_statement({}, _inputs())
    text = json.dumps(statement)
    assert "execution-evidence-lab.dev" not in text and ".invalid" not in text
    assert statement["predicate"]["buildDefinition"]["buildType"] == BUILD_TYPE
    assert BUILD_TYPE.startswith("urn:") and is_uri(BUILD_TYPE)
    client = next(
        d
        for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]
        if d["name"] == "client"
    )
    assert "uri" not in client and client["annotations"] == {"path": "backup-client"}


def test_builder_id_says_where_the_lab_ran() -> None:
    gitlab = {"GITLAB_CI": "true", "CI": "true", "CI_PIPELINE_URL": "https://gl.example/p/-/1"}
    assert identity.builder_id(gitlab) == "https://gl.example/p/-/1"
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert identity.builder_id(pod) == identity.KUBERNETES_BUILDER_ID
    assert identity.builder_id({**pod, "LAB_BUILDER_ID": "urn:x:job"}) == "urn:x:job"
    assert identity.builder_id({"CI": "true"}) == identity.CI_BUILDER_ID
    assert identity.builder_id({"CI": "false"}) is None


def test_dirty_comes_from_the_host_inside_the_container(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LAB_GIT_DIRTY", "1")
    assert identity.git_dirty(tmp_path) is True  # no .git here: the host said so
    monkeypatch.setenv("LAB_GIT_DIRTY", "0")
    assert identity.git_dirty(tmp_path) is False
    monkeypatch.delenv("LAB_GIT_DIRTY")
    assert identity.git_dirty(tmp_path) is None


def test_tool_versions_name_the_compilers_openssl_and_python() -> None:
    from lab.host.doctor import VERSION_COMMANDS

    assert {"gcc", "cc", "make", "openssl"} <= VERSION_COMMANDS.keys()
    env = identity.environment(Path("."), Path("/nonexistent"), {"tool_versions": {}})
    assert env["tool_versions"]["python"].startswith("Python 3.")
