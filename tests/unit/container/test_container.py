"""lab.container and lab.container.base: the pure parts (argv, parsing, decisions).

Real builds and container runs are in tests/integration/test_image.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.container import base as debootstrap
from lab.container import engine, locks
from lab.container import image as images
from lab.container import run as container
from lab.errors import ContainerError
from lab.host import procs
from tests.conftest import ASSETS as TEST_ASSETS
from tests.conftest import ROOT

ASSETS = TEST_ASSETS / "container"


def _options(tmp_path: Path, **kw: object) -> container.RunOptions:
    return container.RunOptions(artifacts=tmp_path, **kw)  # type: ignore[arg-type]


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_run_argv_default_is_an_explicit_capability_set(tmp_path: Path) -> None:
    argv = container.run_argv("img", ["python", "-m", "lab", "doctor"], _options(tmp_path))
    assert argv[:3] == ["docker", "run", "--rm"]
    # bpftrace's cpid filters need host PIDs; the receiver listens on host loopback.
    assert _pairs(argv, "--pid") == ["host"]
    assert _pairs(argv, "--network") == ["host"]
    assert "--privileged" not in argv
    assert _pairs(argv, "--cap-drop") == ["ALL"]
    assert _pairs(argv, "--cap-add") == list(container.COLLECTOR_CAPABILITIES)
    assert _pairs(argv, "--security-opt") == ["seccomp=unconfined", "apparmor=unconfined"]
    assert argv[-5:] == ["img", "python", "-m", "lab", "doctor"]
    assert f"{tmp_path}:/lab/artifacts" in _pairs(argv, "-v")


def test_run_argv_privileged_is_opt_in(tmp_path: Path) -> None:
    argv = container.run_argv("img", ["true"], _options(tmp_path, privileged=True))
    assert "--privileged" in argv
    assert "--cap-add" not in argv and "--cap-drop" not in argv


def test_kernel_mounts_only_where_the_host_has_them(tmp_path: Path) -> None:
    present = {"/sys/kernel/tracing", "/sys/kernel/btf"}
    argv = container.run_argv("img", ["true"], _options(tmp_path), exists=present.__contains__)
    volumes = _pairs(argv, "-v")
    assert "/sys/kernel/tracing:/sys/kernel/tracing" in volumes
    assert "/sys/kernel/btf:/sys/kernel/btf:ro" in volumes
    assert not any(v.startswith(("/lib/modules", "/sys/kernel/debug")) for v in volumes)
    assert "--device" not in argv  # no /dev/kmsg here


def test_the_kernel_log_is_a_read_only_device_where_the_host_has_it(tmp_path: Path) -> None:
    # the sandbox's filter refusals are read from it (lab/sandbox/seccomp.py)
    argv = container.run_argv(
        "img", ["true"], _options(tmp_path), exists={"/dev/kmsg"}.__contains__
    )
    assert _pairs(argv, "--device") == ["/dev/kmsg:/dev/kmsg:r"]


def test_secrets_are_passed_by_name_never_by_value(tmp_path: Path) -> None:
    options = _options(tmp_path, pass_env=("LAB_SIGNING_KEY",), env={"A": "1"})
    argv = container.run_argv("img", ["true"], options)
    assert _pairs(argv, "-e") == ["LAB_SIGNING_KEY", "A=1"]


def test_signing_key_file_is_mounted_read_only(tmp_path: Path) -> None:
    key = tmp_path / "lab.key"
    key.write_text("untrusted comment: x\nRWRTY0Iy\n")
    mounts, by_name, env = container.signing_key_options({"LAB_SIGNING_KEY": str(key)})
    assert mounts == ((key.resolve(), container.CONTAINER_KEY),)
    assert by_name == ()
    assert env == {"LAB_SIGNING_KEY": container.CONTAINER_KEY}
    text = "untrusted comment: signify secret key\nRWRTY0IyAAAA\n"
    assert container.signing_key_options({"LAB_SIGNING_KEY": text}) == (
        (),
        ("LAB_SIGNING_KEY",),
        {},
    )
    assert container.signing_key_options({}) == ((), (), {})


def test_decode_capabilities() -> None:
    # Docker's default set, as /proc/self/status shows it in a default container.
    assert container.decode_capabilities("00000000a80425fb") == [
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "NET_BIND_SERVICE",
        "NET_RAW",
        "SYS_CHROOT",
        "MKNOD",
        "AUDIT_WRITE",
        "SETFCAP",
    ]
    assert container.decode_capabilities("0000000000000000") == []
    host = (ASSETS / "host-capbnd.txt").read_text().split()[1]
    assert "SYS_RESOURCE" not in container.decode_capabilities(host)
    assert "SYS_ADMIN" in container.decode_capabilities(host)


def test_privilege_refusal_is_one_sentence() -> None:
    refused = (ASSETS / "privileged-refused.stderr").read_text()
    message = container.privilege_refusal(refused)
    assert message is not None and "bounding set" in message
    assert message.count(". ") == 0 and message.endswith(".")
    unknown = (ASSETS / "unknown-capability.stderr").read_text()
    assert container.privilege_refusal(unknown) is not None
    assert container.privilege_refusal("docker: some other failure") is None


def test_parse_version() -> None:
    found = engine.parse_version((ASSETS / "docker-version.json").read_text(), 0)
    assert found.server_version.startswith("20.10.24")
    assert found.client_version == "28.2.2"
    with pytest.raises(ContainerError, match=r"daemon is not reachable.*dockerd"):
        engine.parse_version((ASSETS / "docker-version-nodaemon.json").read_text(), 1)


def test_missing_engine_names_what_to_install() -> None:
    assert "apt-get install docker.io" in engine.missing_engine_message(is_root=True, debian=True)
    assert "sudo apt-get" in engine.missing_engine_message(is_root=False, debian=True)
    assert "Docker Engine" in engine.missing_engine_message(is_root=False, debian=False)


def test_probe_falls_back_when_the_engine_lacks_cap_bpf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    unknown = (ASSETS / "unknown-capability.stderr").read_text()

    def fake_run(argv: list[str], **kw: object) -> procs.Completed:
        calls.append(list(argv))
        stderr = kw["stderr"]
        assert isinstance(stderr, Path)
        rejected = "BPF" in argv
        stderr.write_text(unknown if rejected else "")
        done = procs.Completed(list(argv), "probe", 125 if rejected else 0, 0.1, None, None, 0.0)
        done.output = b"" if rejected else b"00000000a82c35fb\n"
        return done

    monkeypatch.setattr(procs, "run", fake_run)
    ctx = engine.Context.for_repo(tmp_path)
    options, held = container.probe_container(ctx, "img", _options(tmp_path))
    assert len(calls) == 2
    assert "BPF" not in options.capabilities and "SYS_ADMIN" in options.capabilities
    assert held["dropped_unknown"] == ["BPF", "PERFMON"]
    assert "SYS_ADMIN" in held["capabilities"] and "NET_RAW" in held["capabilities"]


def test_probe_reports_a_refused_privileged_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_run(argv: list[str], **kw: object) -> procs.Completed:
        stderr = kw["stderr"]
        assert isinstance(stderr, Path)
        stderr.write_text((ASSETS / "privileged-refused.stderr").read_text())
        return procs.Completed(list(argv), "probe", 125, 0.1, None, None, 0.0)

    monkeypatch.setattr(procs, "run", fake_run)
    ctx = engine.Context.for_repo(tmp_path)
    with pytest.raises(ContainerError, match="refused the requested privileges"):
        container.probe_container(ctx, "img", _options(tmp_path, privileged=True))


def test_build_argv_and_args(tmp_path: Path) -> None:
    argv = images.build_argv(
        "t:1", {"B": "2", "A": "1"}, {"L": "x"}, no_cache=True, context=tmp_path
    )
    assert argv[:6] == ["docker", "build", "--network", "host", "--tag", "t:1"]
    assert "--no-cache" in argv
    assert _pairs(argv, "--build-arg") == ["A=1", "B=2"]
    assert _pairs(argv, "--label") == ["L=x"]
    assert argv[-1] == str(tmp_path)
    assert images.rfc3339(0) == "1970-01-01T00:00:00Z"
    assert images.rfc3339(1700000000) == "2023-11-14T22:13:20Z"


def test_stale_lock_gives_the_scripts_sentence(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    sentence = (
        "/opt/lab/docker/apt-packages.lock pins 1 version(s) the Debian archive no longer "
        "serves (gcc-12=0.0); run 'invoke image.lock' to relock, then rebuild."
    )
    log.write_text(f"Step 5/32 : RUN sh apt-install.sh\n{sentence}\nThe command returned 1\n")
    assert images.build_failure(log) == sentence
    log.write_text("Step 9 failed\n")
    assert "build.log" in images.build_failure(log)


def test_inputs_digest_follows_sources_not_build_outputs(tmp_path: Path) -> None:
    for rel in ("Dockerfile", "native/main.c", "lab/x.py", "docker/apt-install.sh"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    first = images.inputs_digest(tmp_path)
    (tmp_path / "native" / "main.o").write_text("object")
    (tmp_path / "native" / "backup-client").write_text("binary")
    (tmp_path / "docker" / "wheels").mkdir()
    (tmp_path / "docker" / "wheels" / "a.whl").write_text("wheel")
    assert images.inputs_digest(tmp_path) == first
    (tmp_path / "native" / "main.c").write_text("changed")
    assert images.inputs_digest(tmp_path) != first


def test_artifacts_owner_prefers_the_sudo_caller(tmp_path: Path) -> None:
    ctx = engine.Context.for_repo(tmp_path)
    assert container.artifacts_owner(ctx, {"SUDO_UID": "1000", "SUDO_GID": "1001"}) == (1000, 1001)
    st = tmp_path.stat()
    assert container.artifacts_owner(ctx, {}) == (st.st_uid, st.st_gid)


def test_host_paths_rewrites_container_paths(tmp_path: Path) -> None:
    ctx = engine.Context.for_repo(tmp_path, artifacts=tmp_path / "artifacts")
    rewrite = container.host_paths(ctx)
    out = rewrite("archive: /lab/artifacts/r1.tar.gz\n")
    assert "/lab/artifacts" not in out and out.endswith("r1.tar.gz\n")


def _echoing(tmp_path: Path, seen: list[str]) -> engine.Context:
    log = procs.CommandLog(tmp_path / "commands.jsonl")
    return engine.Context(root=tmp_path, artifacts=tmp_path, log=log, echo=seen.append)


def test_follow_echoes_whole_lines_and_logs_the_command(tmp_path: Path) -> None:
    seen: list[str] = []
    ctx = _echoing(tmp_path, seen)
    done = engine.follow(
        ctx,
        ["sh", "-c", "echo one; printf 'two\\nthr'; sleep 0.3; echo ee; echo oops >&2"],
        purpose="test",
        out=tmp_path / "out.log",
    )
    assert done.exit_status == 0
    assert "".join(seen) == "one\ntwo\nthree\noops\n"
    row = json.loads((tmp_path / "commands.jsonl").read_text().splitlines()[0])
    assert row["purpose"] == "test"


def test_debian_mirror_deb822_and_one_line(tmp_path: Path) -> None:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list.d" / "debian.sources").write_text((ASSETS / "debian.sources").read_text())
    assert debootstrap.debian_mirror(apt) == "http://mirror.example.org/debian"
    (apt / "sources.list").write_text((ASSETS / "sources.list").read_text())
    # sources.list is read first, its security line skipped.
    assert debootstrap.debian_mirror(apt) == "http://ftp.example.net/debian"
    with pytest.raises(ContainerError, match="set LAB_DEBIAN_MIRROR"):
        debootstrap.debian_mirror(tmp_path / "none", env={})
    assert debootstrap.debian_mirror(
        tmp_path / "none", env={"LAB_DEBIAN_MIRROR": "http://m/d/"}
    ) == ("http://m/d")


def test_sources_are_rendered_for_this_machine(tmp_path: Path) -> None:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list.d" / "debian.sources").write_text((ASSETS / "debian.sources").read_text())
    root = tmp_path / "repo"
    (root / "docker").mkdir(parents=True)
    template = ROOT / "docker" / "debian.sources.in"
    (root / "docker" / "debian.sources.in").write_text(template.read_text())
    text = debootstrap.render_sources(root, apt).read_text()
    assert "@" not in text.replace("Signed-By", "")
    assert "URIs: http://mirror.example.org/debian\n" in text
    assert "-security" in text


def test_base_image_is_pinned_by_digest() -> None:
    name, digest = debootstrap.DEFAULT_BASE_IMAGE.split("@")
    assert name == "debian:bookworm-slim"
    assert digest.startswith("sha256:") and len(digest) == 71
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"ARG BASE_IMAGE={debootstrap.DEFAULT_BASE_IMAGE}" in dockerfile


def test_base_as_dict_drops_unknowns() -> None:
    base = debootstrap.BaseImage(
        reference="lab-base:bookworm-20250101",
        path="debootstrap",
        pinned=debootstrap.DEFAULT_BASE_IMAGE,
        tarball_sha256="ab" * 32,
        mirror="http://mirror.example/debian",
    )
    assert base.as_dict() == {
        "reference": "lab-base:bookworm-20250101",
        "path": "debootstrap",
        "snapshot": {"tarball_sha256": "ab" * 32, "mirror": "http://mirror.example/debian"},
        "stands_in_for": debootstrap.DEFAULT_BASE_IMAGE,
    }


def test_lock_argv_mounts_the_host_ca_only_when_named(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.crt"
    bundle.write_text("cert")
    assert locks.host_ca_bundle({"PIP_CERT": str(bundle)}) == bundle.resolve()
    assert locks.host_ca_bundle({"PIP_CERT": str(tmp_path / "missing")}) is None
    argv = locks.lock_argv("base", tmp_path, tmp_path / "out", bundle)
    assert "PIP_CERT=/etc/lab-host-ca.crt" in argv
    assert argv[-3:] == ["base", "sh", "/src/docker/lock.sh"]
    assert "PIP_CERT=/etc/lab-host-ca.crt" not in locks.lock_argv(
        "base", tmp_path, tmp_path / "out", None
    )


def test_image_identity_reads_the_recorded_file(tmp_path: Path) -> None:
    assert images.image_identity(tmp_path) is None
    (tmp_path / ".image.json").write_text(json.dumps({"id": "sha256:1"}))
    assert images.image_identity(tmp_path) == {"id": "sha256:1"}


def test_every_file_the_lab_reads_in_the_image_is_in_its_build_context() -> None:
    # the image once lacked native/reference/uploader.c (the instrument floor went missing
    # there) and docs/ (a campaign died): .dockerignore is an allow-list, so check it
    import fnmatch

    from lab.campaign.workspace import PUBLIC_DOCS
    from lab.evaluate.floor import source_file
    from lab.pipeline import REPO

    allowed = [
        line[1:]
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    dockerfile = (REPO / "Dockerfile").read_text()
    # and the sandbox's helpers' sources (native/listen/ was missing: the image build died)
    from lab.sandbox import helpers

    native = [h.source_rel for h in (helpers.FILTER, helpers.LISTEN)]
    native += [p.relative_to(REPO).as_posix() for p in (REPO / "native").rglob("*.[ch]")]

    def admitted(rel: str, pattern: str) -> bool:  # Docker's matching: "*" stops at "/"
        if pattern.endswith("/"):
            return rel.startswith(pattern)
        parts, want = rel.split("/"), pattern.split("/")
        return len(parts) == len(want) and all(map(fnmatch.fnmatchcase, parts, want))

    for rel in (source_file().relative_to(REPO).as_posix(), *PUBLIC_DOCS, *native):
        assert any(admitted(rel, p) for p in allowed), rel
        top = rel.split("/")[0]
        assert f"COPY {top}/" in dockerfile or rel in dockerfile, rel


def test_the_builder_and_repository_reach_the_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provenance is written inside the image: CI's names must cross over, by value
    (they are not secrets) and only when set."""
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "owner/lab")
    monkeypatch.setenv("GITHUB_WORKFLOW_REF", "owner/lab/.github/workflows/publish.yml@refs/x")
    monkeypatch.delenv("LAB_BUILDER_ID", raising=False)
    monkeypatch.delenv("LAB_GIT_REPOSITORY", raising=False)
    # no other builder either (CI sets CI=true: that would name the generic CI builder)
    for other in ("CI", "GITLAB_CI", "CI_PIPELINE_URL", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(other, raising=False)
    ctx = engine.Context.for_repo(tmp_path, artifacts=tmp_path / "artifacts")
    env = container.container_options(ctx).env
    assert env["LAB_BUILDER_ID"] == (
        "https://github.com/owner/lab/.github/workflows/publish.yml@refs/x"
    )
    assert env["LAB_GIT_REPOSITORY"] == "https://github.com/owner/lab"
    for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_WORKFLOW_REF"):
        monkeypatch.delenv(name)
    env = container.container_options(ctx).env
    assert "LAB_BUILDER_ID" not in env and "LAB_GIT_REPOSITORY" not in env


def test_follow_live_stderr_keeps_stdout_as_the_document(tmp_path: Path) -> None:
    seen: list[str] = []
    ctx = _echoing(tmp_path, seen)
    done = engine.follow(
        ctx,
        ["sh", "-c", "echo progress >&2; echo '{\"ok\": true}'; echo more >&2"],
        purpose="test",
        out=tmp_path / "out.json",
        live="stderr",
    )
    assert done.exit_status == 0
    assert "".join(seen) == "progress\nmore\n"
    assert json.loads((tmp_path / "out.json").read_text()) == {"ok": True}


def _completed(argv: list[str], status: int) -> procs.Completed:
    return procs.Completed(
        argv=list(argv),
        purpose="test",
        exit_status=status,
        duration_s=0.1,
        stdout_path=None,
        stderr_path=None,
        started_at=0.0,
    )


def test_run_lab_json_reads_the_document_with_host_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = engine.Context.for_repo(tmp_path, artifacts=tmp_path / "artifacts")
    asked: dict[str, object] = {}

    def fake_run_lab(ctx: engine.Context, args: list[str], **kw: object) -> procs.Completed:
        asked.update(kw)
        out = kw["out"]
        assert isinstance(out, Path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"run_dir": f"{container.CONTAINER_ARTIFACTS}/eval-1"}))
        return _completed(args, 1)

    monkeypatch.setattr(container, "run_lab", fake_run_lab)
    done, document = container.run_lab_json(ctx, ["evaluate", "--json"])
    assert done.exit_status == 1 and asked["live"] == "stderr"
    assert document == {"run_dir": str(tmp_path / "artifacts" / "eval-1")}

    def crashed(ctx: engine.Context, args: list[str], **kw: object) -> procs.Completed:
        return _completed(args, 3)

    monkeypatch.setattr(container, "run_lab", crashed)
    assert container.run_lab_json(ctx, ["evaluate", "--json"])[1] is None
