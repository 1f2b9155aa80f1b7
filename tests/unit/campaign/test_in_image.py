"""``lab campaign`` outside the lab image hands the same campaign to it: the task file and
the files the agent command names mounted read-only, the command rewritten to their mount
points, the --agent-env names forwarded by name; a fixture task's whole directory (its
fixture and seeds) is mounted, and the task named inside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lab.campaign import conduct, in_image
from lab.campaign.agent import MOUNTED
from lab.campaign.task import CampaignRequest
from lab.container import run as container
from tests.conftest import ROOT


def test_the_campaign_is_handed_to_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    class Done:
        exit_status = 1

    def run_lab(ctx: object, argv: list[str], **kw: Any) -> Done:
        seen["argv"], seen["kw"] = argv, kw
        return Done()

    monkeypatch.setattr(container, "run_lab", run_lab)
    monkeypatch.setattr(conduct.identity, "in_lab_image", lambda: False)
    monkeypatch.setenv("MODEL_KEY", "secret")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-agent.sh").write_text("echo hi\n")
    request = CampaignRequest(
        task_path=ROOT / "campaigns" / "speedup.yaml",
        agent_cmd="sh my-agent.sh --fast",
        repetitions=3,
        agent_env=("MODEL_KEY",),
        out=tmp_path / "out",
    )
    (tmp_path / "out").mkdir()
    outcome = conduct.execute(request, say=lambda m: None, echo=lambda m: None)
    assert outcome.exit_status == 1
    argv = seen["argv"]
    assert argv[argv.index("--agent-cmd") + 1] == f"sh {MOUNTED}/my-agent.sh --fast"
    assert argv[argv.index("--task") + 1] == "/lab/campaign-input/speedup.yaml"
    assert argv[argv.index("--agent-env") + 1] == "MODEL_KEY"
    assert "secret" not in " ".join(argv)
    mounts = dict(seen["kw"]["mounts"])
    assert mounts[(tmp_path / "my-agent.sh").resolve()] == f"{MOUNTED}/my-agent.sh"
    assert seen["kw"]["forward_env"] == ("MODEL_KEY",)


def test_with_json_the_images_document_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    class Done:
        exit_status = 0

    def run_lab_json(ctx: Any, argv: list[str], **kw: Any) -> tuple[Done, dict[str, Any]]:
        seen["argv"], seen["echo"] = argv, ctx.echo
        return Done(), {"met": 3, "required": 2}

    monkeypatch.setattr(container, "run_lab_json", run_lab_json)
    monkeypatch.setattr(conduct.identity, "in_lab_image", lambda: False)
    request = CampaignRequest(
        task_path=ROOT / "campaigns" / "speedup.yaml",
        agent_cmd="true",
        out=tmp_path / "out",
        json=True,
    )
    outcome = conduct.execute(request, say=lambda m: None, echo=lambda m: None)
    assert outcome.exit_status == 0 and outcome.document == {"met": 3, "required": 2}
    assert seen["argv"][-1] == "--json"
    seen["echo"]("building the image\n")  # progress goes to stderr: stdout is the document
    assert capsys.readouterr() == ("", "building the image\n")


def delegated(monkeypatch: pytest.MonkeyPatch, task: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def fake(root: Path, argv: list[str], **kw: Any) -> tuple[int, None]:
        seen.update(argv=argv, **kw)
        return 0, None

    monkeypatch.setattr(in_image.container, "delegate", fake)
    monkeypatch.chdir(ROOT)
    request = CampaignRequest(task_path=task, agent_cmd="sh tests/assets/agents/safestore-fix.sh",
                              recalibrate=True)  # fmt: skip
    assert in_image.delegate(request) == (0, None)
    return seen


def test_a_fixture_task_is_mounted_with_its_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = delegated(monkeypatch, ROOT / "campaigns" / "safe-store" / "task.yaml")
    mounts = dict(seen["mounts"])
    assert mounts[ROOT / "campaigns" / "safe-store"] == "/lab/campaign-input/safe-store"
    argv = seen["argv"]
    assert argv[argv.index("--task") + 1] == "/lab/campaign-input/safe-store/task.yaml"
    assert "--recalibrate" in argv
    assert any(inside.endswith("/safestore-fix.sh") for inside in mounts.values())


def test_a_backup_task_file_is_mounted_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    task = ROOT / "campaigns" / "speedup.yaml"
    seen = delegated(monkeypatch, task)
    assert dict(seen["mounts"])[task] == "/lab/campaign-input/speedup.yaml"
