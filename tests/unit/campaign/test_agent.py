"""The agent command's files copied into the sandbox, its output echoed line by line, and
the jail's agent options (workspace as directory, the host's network or none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.campaign.agent import LineEcho, agent_argv
from lab.errors import CampaignError
from lab.sandbox.jail import JailSpec, jail_argv


def test_files_the_command_names_are_copied_and_rewritten(tmp_path: Path) -> None:
    cwd, box = tmp_path / "cwd", tmp_path / "box"
    cwd.mkdir()
    box.mkdir()
    (cwd / "agent.sh").write_text("echo hi\n")
    (cwd / "helper.sh").write_text("echo help\n")
    argv, files = agent_argv("sh agent.sh --flag helper.sh /bin/true 'two words'", box, cwd=cwd)
    assert argv[:2] == ["/bin/sh", "-c"]
    assert argv[2] == f"sh {box}/agent.sh --flag {box}/helper.sh /bin/true 'two words'"
    assert sorted(files) == ["agent.sh", "helper.sh"]
    assert (box / "agent.sh").read_text() == "echo hi\n"
    assert (box / "agent.sh").stat().st_mode & 0o777 == 0o555


@pytest.mark.parametrize("command", ["", "   ", "sh 'unclosed"])
def test_an_unusable_command_is_a_campaign_error(tmp_path: Path, command: str) -> None:
    with pytest.raises(CampaignError):
        agent_argv(command, tmp_path, cwd=tmp_path)


def test_output_is_echoed_as_whole_prefixed_lines() -> None:
    seen: list[str] = []
    echo = LineEcho("[r2]", seen.append)
    echo(b"first li")
    assert seen == []
    echo(b"ne\nsecond\n\x1b[31mred\x1b[0m")
    echo.flush()
    assert seen == ["[r2] first line", "[r2] second", "[r2] [31mred[0m"]


def spec(**kw: object) -> JailSpec:
    base: dict[str, object] = {
        "netns_path": Path("/run/netns/x"),
        "uid": 1000,
        "gid": 1000,
        "box": Path("/scratch/box"),
        "home": Path("/scratch/home"),
        "tmp": Path("/scratch/tmp"),
        "resolv_conf": Path("/etc/resolv.conf"),
        "join_files": (Path("/sys/fs/cgroup/unified/lab/x/cgroup.procs"),),
    }
    base.update(kw)
    return JailSpec(**base)  # type: ignore[arg-type]


def test_the_agent_keeps_the_host_network_when_asked_and_works_in_its_workspace() -> None:
    workspace = Path("/scratch/workspace")
    argv = jail_argv(
        spec(netns_path=None, workdir=workspace, extra_env=(("LAB_REPETITION", "2"),)),
        ["/bin/sh", "-c", "true"],
        status_fd=9,
    )
    assert "nsenter" not in argv[0]
    i = argv.index("--chdir")
    assert argv[i + 1] == str(workspace)
    binds = [argv[j + 1 : j + 3] for j, w in enumerate(argv) if w == "--bind"]
    assert [str(workspace), str(workspace)] in binds
    j = argv.index("LAB_REPETITION")
    assert argv[j - 1] == "--setenv" and argv[j + 1] == "2"


def test_a_client_still_enters_its_namespace_and_home() -> None:
    argv = jail_argv(spec(), ["client"], status_fd=9)
    assert argv[0].endswith("nsenter") and argv[1] == "--net=/run/netns/x"
    assert argv[argv.index("--chdir") + 1] == "/home/client"
