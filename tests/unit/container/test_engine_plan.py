"""lab.container.engine: what ``invoke lab.run`` does about the Docker engine, decided with
stubs (nothing is installed or started): as root on Debian a machine with the docker command
but no daemon gets docker.io installed and dockerd started; elsewhere one sentence names what
to install, and a user who is root is never told to run as root."""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pytest

from lab.container import engine
from lab.container.engine import Context, Engine, EngineState, engine_plan
from lab.errors import ContainerError
from lab.host import procs

ANSWERS = Engine(client_version="26.1.5", server_version="26.1.5")


def state(**changes: bool) -> EngineState:
    values = {"cli": True, "daemon": True, "answers": False, "root": True, "debian": True}
    values.update(changes)
    return EngineState(**values)


def test_cli_without_a_daemon_as_root_on_debian_installs_and_starts() -> None:
    assert engine_plan(state(daemon=False), install=True) == ("install", "start")


def test_nothing_installed_as_root_on_debian_installs_and_starts() -> None:
    assert engine_plan(state(cli=False, daemon=False), install=True) == ("install", "start")


def test_an_installed_daemon_that_is_down_is_started() -> None:
    assert engine_plan(state(), install=True) == ("start",)


def test_an_engine_that_answers_needs_nothing() -> None:
    for root, debian in product((True, False), repeat=2):
        assert engine_plan(state(answers=True, root=root, debian=debian), install=False) == ()


@pytest.mark.parametrize(
    ("changes", "install", "needles"),
    [
        # not root, Debian: sudo apt-get, and what running as root would do
        ({"daemon": False, "root": False}, True, ["dockerd", "sudo apt-get install docker.io"]),
        ({"cli": False, "daemon": False, "root": False}, True, ["sudo apt-get install docker.io"]),
        # root but not Debian: what to install, by name
        ({"daemon": False, "debian": False}, True, ["dockerd", "install Docker Engine"]),
        ({"cli": False, "daemon": False, "debian": False}, True, ["install Docker Engine"]),
        # root on Debian but installing was not asked for
        ({"daemon": False}, False, ["dockerd", "'apt-get install docker.io'"]),
        # installed, not running
        ({"root": False}, True, ["sudo systemctl start docker"]),
        ({}, False, ["systemctl start docker", "dockerd --bridge=none --iptables=false"]),
    ],
)
def test_elsewhere_one_sentence_names_what_to_do(
    changes: dict[str, bool], install: bool, needles: list[str]
) -> None:
    with pytest.raises(ContainerError) as info:
        engine_plan(state(**changes), install=install)
    message = str(info.value)
    assert message.endswith(".") and "\n" not in message
    for needle in needles:
        assert needle in message, message
    if changes.get("root", True):
        assert "as root" not in message, "told a root user to run as root"
        assert "sudo" not in message


def test_never_tells_root_to_run_as_root() -> None:
    for cli, daemon, debian, install in product((True, False), repeat=4):
        try:
            engine_plan(state(cli=cli, daemon=daemon, debian=debian), install=install)
        except ContainerError as exc:
            assert "as root" not in str(exc) and "sudo" not in str(exc), exc


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    return Context.for_repo(tmp_path, artifacts=tmp_path / "artifacts")


def _stub_host(
    monkeypatch: pytest.MonkeyPatch, *, on_path: set[str], root: bool, debian: bool
) -> list[str]:
    """A host with ``on_path`` commands; record what ensure_engine did."""
    did: list[str] = []
    daemon_up = {"up": False}
    monkeypatch.setattr(procs, "which", lambda name: f"/bin/{name}" if name in on_path else None)
    monkeypatch.setattr(engine.os, "geteuid", lambda: 0 if root else 1000)
    monkeypatch.setattr(engine, "_is_debian", lambda *a: debian)

    def fake_engine(_ctx: Context) -> Engine:
        did.append("docker version")
        if not daemon_up["up"]:
            raise ContainerError("the Docker daemon is not reachable")
        return ANSWERS

    def fake_install(_ctx: Context, *, cli: bool) -> None:
        did.append(f"apt-get install docker.io (cli {'present' if cli else 'missing'})")
        on_path.update({"docker", "dockerd"})

    def fake_start(_ctx: Context, **_kw: object) -> None:
        did.append("dockerd --bridge=none --iptables=false")
        daemon_up["up"] = True

    monkeypatch.setattr(engine, "engine", fake_engine)
    monkeypatch.setattr(engine, "install_docker_io", fake_install)
    monkeypatch.setattr(engine, "start_daemon", fake_start)
    return did


def test_ensure_engine_installs_the_daemon_beside_a_bare_cli(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    did = _stub_host(monkeypatch, on_path={"docker"}, root=True, debian=True)
    assert engine.ensure_engine(ctx, install=True) == ANSWERS
    assert did == [
        "docker version",
        "apt-get install docker.io (cli present)",
        "docker version",  # the package's service may have started it
        "dockerd --bridge=none --iptables=false",
        "docker version",
    ]


def test_ensure_engine_elsewhere_installs_nothing(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    did = _stub_host(monkeypatch, on_path={"docker"}, root=False, debian=True)
    with pytest.raises(ContainerError, match=r"sudo apt-get install docker\.io"):
        engine.ensure_engine(ctx, install=True)
    assert did == ["docker version"]
