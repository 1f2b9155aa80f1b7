"""deploy/kubernetes: valid manifests (kubernetes-validate, offline), the Indexed Job holding
exactly the container's capability set, one shard per node, and the image's entry point
turning JOB_COMPLETION_INDEX into --shard as the Job sets it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab._cli import build_parser
from lab.run.shard import ShardSpec
from tests.conftest import ROOT, require

DEPLOY = ROOT / "deploy" / "kubernetes"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _job(name: str) -> dict[str, Any]:
    return next(d for p in MANIFESTS for d in _docs(p) if d["metadata"]["name"] == name)


def _container(job: dict[str, Any]) -> dict[str, Any]:
    containers = job["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def documented_capabilities() -> set[str]:
    """The capability table of docs/container.md ("Capabilities, one by one")."""
    text = (ROOT / "docs" / "container.md").read_text()
    section = text.split("## Capabilities, one by one", 1)[1].split("Not granted", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([A-Z_]+)`", line.split("|")[1]))
    return names


def test_manifests_exist() -> None:
    names = {p.name for p in MANIFESTS}
    assert {"shards-job.yaml", "merge-job.yaml", "shards-pvc.yaml"} <= names


@pytest.mark.parametrize("version", ["1.30.0", None])
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifests_validate(path: Path, version: str | None) -> None:
    try:
        import kubernetes_validate
    except ImportError:
        kubernetes_validate = None
    require(
        "kubernetes-validate", kubernetes_validate is not None, "pip install kubernetes-validate"
    )
    assert kubernetes_validate is not None
    for doc in _docs(path):
        kubernetes_validate.validate(
            doc, version or kubernetes_validate.latest_version(), strict=True
        )


def test_indexed_job_shape() -> None:
    job = _job("lab-shards")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    pod = spec["template"]["spec"]
    container = _container(job)
    env = _env(container)
    assert int(env["LAB_SHARD_COUNT"]) == spec["completions"] == spec["parallelism"]
    assert env["LAB_RUN_ID"]
    assert pod["hostPID"] is True
    assert not pod.get("hostNetwork"), "the sandbox makes its own network namespaces"
    security = container["securityContext"]
    assert security.get("privileged") is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert set(security["capabilities"]["add"]) == documented_capabilities()
    assert security["seccompProfile"]["type"] == "Unconfined"
    host_paths = {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert {"/sys/kernel/tracing", "/sys/kernel/debug", "/sys/fs/cgroup"} <= host_paths
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/sys/kernel/tracing", "/sys/kernel/debug", "/sys/fs/cgroup", "/lab/shards"} <= mounts
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"lab-shards"}


def test_one_shard_per_node() -> None:
    job = _job("lab-shards")
    pod = job["spec"]["template"]
    terms = pod["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert [t["topologyKey"] for t in terms] == ["kubernetes.io/hostname"]
    selector = terms[0]["labelSelector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()


def test_merge_job_reads_the_same_volume_and_run() -> None:
    merge, shards = _job("lab-merge"), _job("lab-shards")
    container = _container(merge)
    pod = merge["spec"]["template"]["spec"]
    assert _env(container)["LAB_RUN_ID"] == _env(_container(shards))["LAB_RUN_ID"]
    script = " ".join(container["args"])
    assert "python -m lab merge" in script and "--pubkey" in script
    assert '"$LAB_RUN_ID"-shard*of*.tar.gz' in script
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert not pod.get("hostPID") and not any("hostPath" in v for v in pod["volumes"])
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"lab-shards"}


def _entrypoint(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("JOB_COMPLETION_INDEX", "LAB_SHARD_COUNT", "LAB_RUN_ID")
    }
    return subprocess.run(
        ["sh", str(ROOT / "docker" / "entrypoint.sh"), "printf", "%s\\n", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_entrypoint_turns_the_completion_index_into_a_shard() -> None:
    """Each pod of the Indexed Job, with JOB_COMPLETION_INDEX as Kubernetes sets it (0 … N-1)
    and the Job's own environment, gets a distinct valid shard of the same run."""
    job = _job("lab-shards")
    container = _container(job)
    env = {k: v for k, v in _env(container).items() if isinstance(v, str)}
    count = job["spec"]["completions"]
    seen = []
    for index in range(count):
        done = _entrypoint(container["args"], JOB_COMPLETION_INDEX=str(index), **env)
        assert done.returncode == 0, done.stderr
        argv = done.stdout.splitlines()
        assert argv[:3] == ["python", "-m", "lab"]
        args = build_parser().parse_args(argv[3:])
        assert args.command == "run"
        assert args.shard == ShardSpec.from_completion_index(index, count)
        assert args.run_id == env["LAB_RUN_ID"]
        seen.append(args.shard)
    assert len(set(seen)) == count


def test_entrypoint_without_a_shard_count_passes_the_command_unchanged() -> None:
    done = _entrypoint(["python", "-m", "lab", "doctor"], JOB_COMPLETION_INDEX="1")
    assert done.returncode == 0 and done.stdout.splitlines() == ["python", "-m", "lab", "doctor"]


@pytest.mark.parametrize("index", ["", "x", "-1"])
def test_entrypoint_refuses_a_bad_index(index: str) -> None:
    done = _entrypoint(["true"], JOB_COMPLETION_INDEX=index, LAB_SHARD_COUNT="3")
    assert done.returncode == 2
    assert "Indexed Job" in done.stderr and done.stderr.count("\n") == 1
