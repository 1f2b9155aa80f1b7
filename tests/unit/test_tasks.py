"""tasks.py: the namespaces exist and each task passes its options through unchanged."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from invoke.context import MockContext
from invoke.exceptions import Exit
from invoke.program import Program
from invoke.runners import Result

from lab.container import engine
from lab.container import run as container
from lab.errors import ContainerError, UsageError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tasks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lab_tasks", ROOT / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def fake_run_lab(ctx: engine.Context, args: Sequence[str], **kw: Any) -> Any:
        seen.append({"args": list(args), **kw})
        return SimpleNamespace(exit_status=0)

    monkeypatch.setattr(container, "run_lab", fake_run_lab)
    return seen


def test_namespaces(tasks: ModuleType) -> None:
    names = set(tasks.ns.task_names)
    assert {
        "lab.build",
        "lab.run",
        "lab.doctor",
        "lab.shell",
        "lab.verify",
        "lab.evaluate",
        "lab.merge",
        "keys.generate",
        "image.lock",
        "clean",
    } <= names


def test_run_defaults_to_every_scenario_in_the_container(
    tasks: ModuleType, calls: list[dict[str, Any]]
) -> None:
    tasks.run(MockContext())
    assert calls == [
        {
            "args": [
                "run",
                "--all",
                "--collector",
                "all",
                "--packets",
                "required",
                "--repetitions",
                "1",
                "--out",
                "/lab/artifacts",
            ],
            "privileged": False,
            "mounts": (),
            "rebuild": False,
        }
    ]


def test_run_passes_options_through(tasks: ModuleType, calls: list[dict[str, Any]]) -> None:
    tasks.run(
        MockContext(),
        scenario=["baseline", "hash-storm"],
        collector="bpftrace",
        packets="best-effort",
        repetitions=3,
        size=4096,
        privileged=True,
    )
    args = calls[0]["args"]
    assert args[:3] == ["run", "baseline", "hash-storm"]
    assert "--all" not in args
    text = " ".join(args)
    assert "--collector bpftrace --packets best-effort --repetitions 3 --size 4096" in text
    assert calls[0]["privileged"] is True


def test_run_local_runs_the_cli_on_the_host(tasks: ModuleType, calls: list[dict[str, Any]]) -> None:
    expected = shlex.join(
        [
            sys.executable,
            "-m",
            "lab",
            "run",
            "baseline",
            "--collector",
            "none",
            "--packets",
            "off",
            "--repetitions",
            "1",
            "--out",
            str(ROOT / "artifacts"),
        ]
    )
    c = MockContext(run={expected: Result()})
    tasks.run(c, scenario=["baseline"], collector="none", packets="off", local=True)
    assert calls == []


def test_evaluate_runs_the_cli_which_delegates_to_the_image(
    tasks: ModuleType, calls: list[dict[str, Any]], tmp_path: Path
) -> None:
    patch = tmp_path / "fix.patch"
    patch.write_text("--- a\n+++ b\n")
    argv = [sys.executable, "-m", "lab", "evaluate", "--patch", str(patch), "--out"]
    argv += [str(ROOT / "artifacts"), "--repetitions", "5"]
    tasks.evaluate(MockContext(run={shlex.join(argv): Result()}), patch=str(patch), repetitions=5)
    local = [*argv, "--local"]
    tasks.evaluate(
        MockContext(run={shlex.join(local): Result()}), patch=str(patch), repetitions=5, local=True
    )
    assert calls == []


def test_evaluate_in_image_mounts_the_candidate_read_only(
    calls: list[dict[str, Any]], tmp_path: Path
) -> None:
    from lab._cli import build_parser, evaluation_request
    from lab.evaluate import judge

    patch = tmp_path / "fix.patch"
    patch.write_text("--- a\n+++ b\n")
    args = build_parser().parse_args(
        ["evaluate", "--patch", str(patch), "--repetitions", "5", "--out", str(tmp_path / "a")]
    )
    outcome = judge.execute(evaluation_request(args), say=print)
    assert outcome.exit_status == 0 and outcome.evaluation is None  # the image's archive has it
    call = calls[0]
    assert call["args"][:5] == [
        "evaluate",
        "--patch",
        "/lab/candidate/fix.patch",
        "--repetitions",
        "5",
    ]
    assert call["args"][5:] == [
        "--timing-runs", "12",
        "--collector", "all",
        "--packets", "best-effort",
        "--size", "524288",
        "--timeout", "15.0",
        "--out", "/lab/artifacts",
    ]  # fmt: skip
    assert call["mounts"] == ((patch.resolve(), "/lab/candidate/fix.patch"),)


def test_container_exit_status_passes_through(
    tasks: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(container, "run_lab", lambda *a, **k: SimpleNamespace(exit_status=1))
    with pytest.raises(SystemExit) as stop:
        tasks.run(MockContext())
    assert stop.value.code == 1


def test_evaluate_needs_exactly_one_candidate(
    tasks: ModuleType, calls: list[dict[str, Any]]
) -> None:
    with pytest.raises(Exit) as stop:
        tasks.evaluate(MockContext(), patch="a", binary="b")
    assert stop.value.code == UsageError.exit_code
    assert stop.value.message == (
        "error: lab.evaluate needs exactly one of --patch, --source-dir, --binary."
    )
    assert calls == []


def test_doctor_and_verify(tasks: ModuleType, calls: list[dict[str, Any]]) -> None:
    tasks.doctor(MockContext(), json=True)
    assert calls[0]["args"] == ["doctor", "--json"]
    expected = shlex.join([sys.executable, "-m", "lab", "verify", "a.tar.gz", "--pubkey", "k"])
    tasks.verify(MockContext(run={expected: Result()}), archive="a.tar.gz", pubkey="k")


def test_a_lab_error_becomes_one_line_and_its_exit_status(
    tasks: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(*args: Any, **kw: Any) -> None:
        raise ContainerError(
            "Docker is not installed; install it with 'apt-get install docker.io'."
        )

    monkeypatch.setattr(container, "run_lab", refuse)
    with pytest.raises(Exit) as stop:
        tasks.run(MockContext())
    assert stop.value.code == ContainerError.exit_code
    # invoke prints the message on stderr and exits with the code
    with pytest.raises(SystemExit) as program:
        Program(namespace=tasks.ns).run(["invoke", "lab.run"])
    assert program.value.code == ContainerError.exit_code
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ")
    assert "apt-get install docker.io" in err


def test_every_task_turns_lab_errors_into_an_exit(tasks: ModuleType) -> None:
    """One decorator, on every task; no task catches LabError itself."""
    source = (ROOT / "tasks.py").read_text()
    assert source.count("@task") == source.count("@lab_errors") == len(tasks.ns.task_names)
    assert source.count("except LabError") == 1
    assert "sys.path.insert" not in source


def test_run_passes_shard_and_run_id(tasks: ModuleType, calls: list[dict[str, Any]]) -> None:
    tasks.run(MockContext(), shard="2/3", run_id="campaign-1")
    text = " ".join(calls[0]["args"])
    assert "--shard 2/3 --run-id campaign-1" in text


def test_campaign_passes_the_agent_watching_options(
    tasks: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(tasks, "_host_lab", lambda c, args: seen.append(list(args)))
    tasks.campaign(
        MockContext(),
        agent_cmd="sh a.sh",
        agent_network="model=127.0.0.1:11434",
        stop_on_plateau=2,
        escalate_cmd="sh b.sh",
        recalibrate=True,
    )
    [args] = seen
    text = " ".join(args)
    assert "--agent-network model=127.0.0.1:11434" in text
    assert "--stop-on-plateau 2" in text and "--recalibrate" in args
    assert args[args.index("--escalate-cmd") + 1] == "sh b.sh"


def test_merge_expands_globs_and_runs_on_the_host(tasks: ModuleType, tmp_path: Path) -> None:
    for name in ("b-shard2of2.tar.gz", "a-shard1of2.tar.gz"):
        (tmp_path / name).write_bytes(b"")
    archives = [str(tmp_path / "a-shard1of2.tar.gz"), str(tmp_path / "b-shard2of2.tar.gz")]
    expected = shlex.join(
        [sys.executable, "-m", "lab", "merge", *archives, "--pubkey", "k", "--out", "m"]
    )
    c = MockContext(run={expected: Result()})
    tasks.merge(c, pubkey="k", archive=[str(tmp_path / "*.tar.gz")], out="m")
    with pytest.raises(Exit) as stop:
        tasks.merge(MockContext(), pubkey="k", archive=[])
    assert "needs the shard archives" in str(stop.value.message)
