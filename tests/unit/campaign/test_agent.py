"""The agent command's files copied into the sandbox, its output echoed line by line, and
the jail's agent options (workspace as directory, the host's network or none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.campaign.agent import LineEcho, agent_argv, names_file
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
        "filter": Path("/cache/lab-filter"),
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


def test_a_file_named_by_an_absolute_path_is_copied_too(tmp_path: Path) -> None:
    """What people type: ``sh /home/me/agent.sh``. It is copied like a relative name; a
    path under /usr (the sandbox shows it) and a directory are left as they are."""
    here, box, elsewhere = tmp_path / "cwd", tmp_path / "box", tmp_path / "elsewhere"
    for path in (here, box, elsewhere):
        path.mkdir()
    (elsewhere / "agent.sh").write_text("echo abs\n")
    command = f"sh {elsewhere}/agent.sh /usr/bin/env {elsewhere}"
    argv, files = agent_argv(command, box, cwd=here)
    assert argv[2] == f"sh {box}/agent.sh /usr/bin/env {elsewhere}"
    assert (box / "agent.sh").read_text() == "echo abs\n"
    assert list(files) == ["agent.sh"]


def test_names_file_only_for_regular_files_outside_usr(tmp_path: Path) -> None:
    (tmp_path / "a.sh").write_text("")
    assert names_file("a.sh", tmp_path) == tmp_path / "a.sh"
    assert names_file(str(tmp_path / "a.sh"), Path("/")) == tmp_path / "a.sh"
    assert names_file("/usr/bin/env", tmp_path) is None
    assert names_file("--flag", tmp_path) is None
    assert names_file(str(tmp_path), tmp_path) is None
    assert names_file("missing.sh", tmp_path) is None


def test_an_agent_that_cannot_start_says_why(tmp_path: Path) -> None:
    """``sh: 0: cannot open`` was only in agent.stderr; now the record quotes its end and the
    outcome's reason (which the console prints) carries it."""
    from lab.campaign.outcome import before_judging
    from lab.campaign.records import agent_record
    from lab.model.campaign import PatchRecord
    from lab.sandbox import Outcome

    stderr = tmp_path / "agent.stderr"
    stderr.write_text("sh: 0: cannot open /nowhere/agent.sh: No such file\n")
    ran = Outcome(exit_status=2, timed_out=False, wall_s=0.03, cpu_s=None, main_pid=7)
    agent = agent_record(ran, stderr)
    assert agent.stderr_tail == "sh: 0: cannot open /nowhere/agent.sh: No such file"
    patch = PatchRecord(
        sha256="0" * 64,
        bytes=0,
        files_changed=(),
        outside_native=(),
        native_empty=True,
        final_commit=None,
        bundle_sha256=None,
    )
    early = before_judging(agent, patch, budget_s=10)
    assert early is not None and early[0] == "agent-crashed"
    assert "cannot open /nowhere/agent.sh" in early[1]
    # an agent that exited 0 is not quoted
    ok = agent_record(
        Outcome(exit_status=0, timed_out=False, wall_s=1, cpu_s=None, main_pid=7), stderr
    )
    assert ok.stderr_tail is None
