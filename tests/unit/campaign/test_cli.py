"""``lab campaign --json``: one JSON document on stdout, human text (the agent's lines
included) on stderr; the exit status is the campaign's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lab import _cli
from lab.campaign import conduct
from lab.campaign.conduct import CampaignOutcome
from lab.campaign.task import CampaignRequest
from tests.unit.model.test_campaign import record, rep


def fake_execute(
    request: CampaignRequest, *, say: Callable[[str], None], echo: Callable[[str], None]
) -> CampaignOutcome:
    say("Repetition 1/2: the agent starts")
    echo("[r1] thinking out loud")
    campaign = record(rep(1, "met"), rep(2, "failed", {"C3": "fail"}), required=2)
    return CampaignOutcome(exit_status=1, campaign=campaign)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[CampaignRequest]:
    requests: list[CampaignRequest] = []

    def spy(request: CampaignRequest, **kw: Any) -> CampaignOutcome:
        requests.append(request)
        return fake_execute(request, **kw)

    monkeypatch.setattr(conduct, "execute", spy)
    return requests


def test_json_on_stdout_and_people_s_text_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seen: list[CampaignRequest]
) -> None:
    code = _cli.main(
        ["campaign", "--task", "t.yaml", "--agent-cmd", "sh a.sh", "--repetitions", "2",
         "--budget", "30", "--require", "2", "--agent-network", "none", "--json",
         "--out", str(tmp_path)]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1
    document = json.loads(out)
    assert [r["outcome"] for r in document["repetitions"]] == ["met", "failed"]
    assert document["repetitions"][1]["failed_clauses"] == ["C3"]
    assert (document["met"], document["required"]) == (1, 2)
    assert set(document) >= {"repetitions", "met", "required", "archive", "archive_sha256"}
    assert "[r1] thinking out loud" in err and "Repetition 1/2" in err
    assert "1 of 2 repetitions met the task" in err.replace("\n", " ")
    (request,) = seen
    assert (request.repetitions, request.budget_s, request.require) == (2, 30.0, 2)
    assert request.agent_network == "none"


def test_without_json_everything_is_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seen: list[CampaignRequest]
) -> None:
    code = _cli.main(
        ["campaign", "--task", "t.yaml", "--agent-cmd", "sh a.sh", "--out", str(tmp_path)]
    )
    out, _ = capsys.readouterr()
    assert code == 1
    assert "[r1] thinking out loud" in out and "r2: failed" in out
