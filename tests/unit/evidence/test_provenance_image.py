"""The provenance's image and base records: the image's content digest (its layers' OCI
ChainID) and its local ID as two named fields, one coherent base record (a registry digest,
or a debootstrap snapshot with its dates), and every tool version docs/build-type.md lists."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from lab.container import base as debootstrap
from lab.container import image as images
from lab.evidence.provenance import ProvenanceInputs, build_statement
from lab.host import identity
from lab.host.doctor import VERSION_COMMANDS, gather_facts
from tests.conftest import ROOT

LAYER_A = "sha256:" + "a" * 64
LAYER_B = "sha256:" + "b" * 64
LAYER_C = "sha256:" + "c" * 64
LOCAL_ID = "sha256:" + "9" * 64


def _statement(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "run_id": "run-1",
        "started_on": "2026-01-01T00:00:00.000000Z",
        "finished_on": "2026-01-01T00:05:00.000000Z",
        "scenarios": ["baseline"],
        "image_name": "execution-evidence-lab:0.1.0",
    }
    values.update(changes)
    return build_statement({}, ProvenanceInputs(**values))


def _image_dependency(statement: dict[str, Any]) -> dict[str, Any]:
    deps = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    return next(d for d in deps if d["name"] == "image")


def test_chain_id_follows_the_oci_image_spec() -> None:
    # ChainID(L0) = DiffID(L0); ChainID(L0|L1) = sha256(ChainID(L0) + " " + DiffID(L1))
    assert identity.chain_id([]) is None
    assert identity.chain_id([LAYER_A]) == LAYER_A
    two = "sha256:" + hashlib.sha256(f"{LAYER_A} {LAYER_B}".encode()).hexdigest()
    assert identity.chain_id([LAYER_A, LAYER_B]) == two
    three = "sha256:" + hashlib.sha256(f"{two} {LAYER_C}".encode()).hexdigest()
    assert identity.chain_id([LAYER_A, LAYER_B, LAYER_C]) == three
    # the order of the layers is part of the content
    assert identity.chain_id([LAYER_B, LAYER_A]) != two


def test_the_image_record_names_its_content_digest_and_local_id_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    info = {
        "Id": LOCAL_ID,
        "RootFS": {"Layers": [LAYER_A, LAYER_B]},
        "RepoDigests": [],
        "Size": 1,
        "Config": {"Labels": {}},
    }
    monkeypatch.setattr(images, "inspect_image", lambda _ctx, _tag: info)
    monkeypatch.setattr(images, "image_manifest", lambda _ctx, _tag: {})
    base = debootstrap.BaseImage(reference="r", path="pulled", pinned="r", digest=LAYER_C)
    no_ctx: Any = None  # the engine is replaced above
    record = images._identity(no_ctx, "execution-evidence-lab:j", base, "inputs")
    assert record["id"] == LOCAL_ID
    assert record["content_digest"] == identity.chain_id([LAYER_A, LAYER_B])
    assert record["content_digest"] != record["id"]
    assert record["repo_digest"] is None  # built here, never pushed: no registry digest
    assert "digest" not in record  # the one ambiguous field is gone
    info["RepoDigests"] = [f"registry.example/lab@{LAYER_C}"]
    assert images._identity(no_ctx, "t", base, "i")["repo_digest"] == LAYER_C


def test_image_digests_reads_new_and_earlier_records() -> None:
    content = identity.chain_id([LAYER_A, LAYER_B])
    assert identity.image_digests({"id": LOCAL_ID, "content_digest": content}) == (
        content,
        LOCAL_ID,
    )
    # an earlier record held the local ID twice: it has no content digest
    assert identity.image_digests({"id": LOCAL_ID, "digest": LOCAL_ID}) == (None, LOCAL_ID)
    assert identity.image_digests({"id": LOCAL_ID, "digest": LAYER_A}) == (LAYER_A, LOCAL_ID)
    assert identity.image_digests(None) == (None, None)


def test_the_statement_carries_the_content_digest_and_the_local_id_as_an_annotation() -> None:
    content = identity.chain_id([LAYER_A, LAYER_B])
    image = _image_dependency(_statement(image_digest=content, image_id=LOCAL_ID))
    assert image["uri"] == "docker-image://execution-evidence-lab:0.1.0"
    assert image["digest"] == {"sha256": content.split(":", 1)[1]}
    assert image["annotations"] == {"localImageId": LOCAL_ID}
    # a record with only a local ID: no digest is claimed for the content
    only_id = _image_dependency(_statement(image_id=LOCAL_ID))
    assert "digest" not in only_id and only_id["annotations"] == {"localImageId": LOCAL_ID}


def test_a_pulled_base_names_its_registry_digest_and_nothing_of_debootstrap() -> None:
    pulled = debootstrap.BaseImage(
        reference=debootstrap.DEFAULT_BASE_IMAGE,
        path="pulled",
        pinned=debootstrap.DEFAULT_BASE_IMAGE,
        digest=LAYER_A,
        image_id=LOCAL_ID,
    ).as_dict()
    assert pulled == {
        "path": "pulled",
        "reference": debootstrap.DEFAULT_BASE_IMAGE,
        "digest": LAYER_A,
        "image_id": LOCAL_ID,
    }


def test_a_bootstrapped_base_is_one_snapshot_record(tmp_path: Path) -> None:
    lists = tmp_path / "var" / "lib" / "apt" / "lists"
    lists.mkdir(parents=True)
    (lists / "deb.example_debian_dists_bookworm_Release").write_text(
        "Origin: Debian\nSuite: stable\nDate: Sat, 17 May 2025 09:01:12 UTC\nValid-Until: x\n"
    )
    released = debootstrap.archive_date(tmp_path)
    assert released == "2025-05-17T09:01:12Z"
    record = debootstrap.BaseImage(
        reference="lab-base:bookworm-20261202",
        path="debootstrap",
        pinned=debootstrap.DEFAULT_BASE_IMAGE,
        image_id=LOCAL_ID,
        tarball_sha256="d" * 64,
        mirror="http://deb.example/debian",
        suite="bookworm",
        bootstrapped_at="2026-12-02T14:00:00Z",
        variant="minbase",
        archive_date=released,
    ).as_dict()
    assert record == {
        "path": "debootstrap",
        "reference": "lab-base:bookworm-20261202",
        "snapshot": {
            "suite": "bookworm",
            "variant": "minbase",
            "mirror": "http://deb.example/debian",
            "archive_date": "2025-05-17T09:01:12Z",
            "bootstrapped_at": "2026-12-02T14:00:00Z",
            "tarball_sha256": "d" * 64,
        },
        # the pinned image is named as what this base stands in for, never as the one used
        "stands_in_for": debootstrap.DEFAULT_BASE_IMAGE,
        "image_id": LOCAL_ID,
    }
    assert "pinned" not in record and "digest" not in record
    assert debootstrap.archive_date(tmp_path / "nothing") is None


def _documented_tools() -> set[str]:
    text = (ROOT / "docs" / "build-type.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if "internalParameters.toolVersions" in line)
    meaning = row.split("|")[2]
    # every backticked word before the note on absent tools, less the options
    names = set(re.findall(r"`([a-z]+)`", meaning.split("a tool absent")[0]))
    return names


def test_every_tool_version_the_build_type_lists_is_asked_for() -> None:
    listed = _documented_tools()
    assert listed == {
        "gcc",
        "cc",
        "make",
        "openssl",
        "python",
        "strace",
        "bpftrace",
        "perf",
        "tcpdump",
    }, "docs/build-type.md's toolVersions row changed: update this test with it"
    # python is the interpreter running the lab; every other one is a version command
    assert listed - {"python"} <= VERSION_COMMANDS.keys()
    env = identity.environment(Path("."), Path("/nonexistent"), {"tool_versions": {}})
    assert env["tool_versions"]["python"].startswith("Python 3.")


def test_every_listed_tool_installed_here_has_its_version_recorded() -> None:
    env = identity.environment(Path("."), Path("/nonexistent"), gather_facts())
    for tool in _documented_tools() - {"python"}:
        if shutil.which(VERSION_COMMANDS[tool][0]) is not None:
            assert env["tool_versions"].get(tool), f"{tool} is installed but has no version"
