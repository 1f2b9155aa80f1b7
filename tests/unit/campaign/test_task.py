"""The campaign task file: the shipped one loads, a broken one is one sentence (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.campaign.settle import settle
from lab.campaign.task import CampaignRequest, load_task
from lab.errors import CampaignError, UsageError
from tests.conftest import ROOT

SPEEDUP = ROOT / "campaigns" / "speedup.yaml"


def test_the_shipped_speedup_task_loads() -> None:
    task = load_task(SPEEDUP)
    assert task.name == "speedup"
    assert task.baseline_must == "pass"
    assert task.clauses == ("C1", "C2", "C3", "C4", "C5", "C6")
    assert task.speed is not None and task.speed.max_ratio == 0.95
    # the goal is where the client dominates what is measured (issue 25): its own CPU time
    # of the first backup of a 64 MiB file, which a real speed-up meets (docs/performance.md)
    assert task.speed.metric == "first_backup_cpu"
    assert task.speed.size == 64 * 1024 * 1024
    assert "faster" in task.text
    assert len(task.sha256) == 64


def test_the_test_task_loads() -> None:
    task = load_task(ROOT / "tests" / "assets" / "campaigns" / "quick-speedup.yaml")
    assert task.speed is None
    assert task.evaluation["repetitions"] == 1


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (("must: pass", "must: maybe"), "baseline.must' must be one of pass, fail"),
        (("budget_s: 1800", "budget_s: -1"), "budget_s"),
        (("clauses: [C1, C2, C3, C4, C5, C6]", "clauses: [C7]"), "success.clauses[0]"),
        (("name: speedup", "name: speedup\nextra: 1"), "has a key that is not allowed"),
    ],
)
def test_a_broken_task_file_is_one_sentence(
    tmp_path: Path, edit: tuple[str, str], words: str
) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(SPEEDUP.read_text().replace(*edit, 1))
    with pytest.raises(CampaignError) as caught:
        load_task(path)
    assert words in str(caught.value)
    assert str(caught.value).startswith(str(path))
    assert caught.value.exit_code == 2


def test_not_yaml_is_a_campaign_error(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(CampaignError):
        load_task(path)


def request(**kw: object) -> CampaignRequest:
    return CampaignRequest(task_path=SPEEDUP, agent_cmd="sh agent.sh", **kw)  # type: ignore[arg-type]


def test_settings_come_from_the_command_line_then_the_task_file(tmp_path: Path) -> None:
    task = load_task(SPEEDUP)
    chosen = settle(request(out=tmp_path), task)
    assert (chosen.repetitions, chosen.budget_s, chosen.required) == (3, 1800.0, 3)
    assert chosen.evaluation.repetitions == 3 and chosen.evaluation.collector == "all"
    chosen = settle(
        request(out=tmp_path, repetitions=5, require=2, budget_s=10, eval_repetitions=1, size=4096),
        task,
    )
    assert (chosen.repetitions, chosen.budget_s, chosen.required) == (5, 10, 2)
    assert chosen.evaluation.repetitions == 1 and chosen.evaluation.size == 4096


def test_the_speed_goal_metric_decides_when_the_timing_rounds_stop(tmp_path: Path) -> None:
    task = load_task(SPEEDUP)  # its goal: first_backup_cpu; its timing_runs: 20
    ev = settle(request(out=tmp_path), task).evaluation
    assert ev.timing_metrics == ("first_backup_wall", "first_backup_cpu")
    assert (ev.timing_runs, ev.timing_cap) == (20, 100)  # 5 × the least
    ev = settle(request(out=tmp_path, timing_runs=8, timing_max_runs=8), task).evaluation
    assert (ev.timing_runs, ev.timing_cap) == (8, 8)


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"require": 4}, "--require 4 must be between 1 and --repetitions (3)"),
        ({"budget_s": 0}, "--budget 0"),
        ({"agent_network": "bridge"}, "--agent-network"),
        (
            {"timing_runs": 12, "timing_max_runs": 6},
            "--timing-max-runs 6 must be at least --timing-runs (12)",
        ),
    ],
)
def test_settings_out_of_range_are_usage_errors(
    tmp_path: Path, kw: dict[str, object], words: str
) -> None:
    with pytest.raises(UsageError) as caught:
        settle(request(out=tmp_path, **kw), load_task(SPEEDUP))
    assert words in str(caught.value)


def test_the_request_asks_the_image_for_the_same_campaign() -> None:
    argv = request(repetitions=3, require=2, budget_s=60).argv(task="/t.yaml", out="/out")
    assert argv[:7] == [
        "campaign",
        "--task",
        "/t.yaml",
        "--agent-cmd",
        "sh agent.sh",
        "--out",
        "/out",
    ]
    assert argv[argv.index("--repetitions") + 1] == "3"
    assert argv[argv.index("--require") + 1] == "2"
    assert argv[argv.index("--agent-network") + 1] == "host"


def test_agent_env_names_a_set_variable_never_the_lab_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODEL_API_KEY", "secret")
    monkeypatch.setenv("LAB_SIGNING_KEY", "/keys/lab.sec")
    task = load_task(SPEEDUP)
    settle(request(out=tmp_path, agent_env=("MODEL_API_KEY",)), task)
    for name, words in (("LAB_SIGNING_KEY", "not starting with LAB_"), ("UNSET_X", "not set")):
        monkeypatch.delenv("UNSET_X", raising=False)
        with pytest.raises(UsageError) as caught:
            settle(request(out=tmp_path, agent_env=(name,)), task)
        assert words in str(caught.value)
    argv = request(agent_env=("MODEL_API_KEY",)).argv(task="t", out="o")
    assert argv[argv.index("--agent-env") + 1] == "MODEL_API_KEY"
