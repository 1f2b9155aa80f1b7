"""``lab campaign --shard I/N``: every agent run in exactly one shard, one shared run id, and
``lab merge`` of a campaign's shards: the unsharded campaign's record (k of N met, every run
in order, each run's directory where it belongs), or one sentence refusing them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lab import __version__
from lab._cli import build_parser, main
from lab.campaign import shard as campaign_shard
from lab.campaign.settle import settle
from lab.campaign.task import CampaignRequest, load_task
from lab.evaluate import judge
from lab.evidence.signing import Signer
from lab.merge.combine import MergeRequest, merge
from lab.model import RunResult
from lab.model.evaluation import EvaluationLimits
from lab.run import shard
from lab.run.shard import ShardSpec
from lab.workloads.backup import scenario
from tests.conftest import ASSETS, ROOT
from tests.unit.merge.conftest import key  # noqa: F401 - the signing key fixture
from tests.unit.merge.shard_archives import pack_shard, refused
from tests.unit.model.test_campaign import record, rep
from tests.unit.reports.reports_sample import build_sample_run

TASK = ASSETS / "campaigns" / "quick-speedup.yaml"
OUTCOMES = ["met", "failed", "no-change", "met", "timed-out"]


@pytest.mark.parametrize("repetitions", range(1, 9))
@pytest.mark.parametrize("count", range(1, 9))
def test_every_agent_run_in_exactly_one_shard(repetitions: int, count: int) -> None:
    units = campaign_shard.units(repetitions)
    if count > repetitions:
        with pytest.raises(Exception, match="nothing to do"):
            shard.partition(units, count)
        return
    parts = shard.partition(units, count)
    flat = [u.repetition for p in parts for u in p]
    assert sorted(flat) == list(range(1, repetitions + 1)) and len(flat) == len(set(flat))


def test_the_shared_run_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    task = load_task(TASK)
    conditions = scenario.select(ROOT / "scenarios" / "candidate", [], True)
    limits = EvaluationLimits(invocation_timeout_s=30.0, build_timeout_s=300.0, timing_runs=2)
    frozen = judge.freeze(conditions, size=65_536, repetitions=1, limits=limits)

    def plan(index: int, count: int, **kw: object) -> campaign_shard.CampaignShard:
        options: dict[str, object] = {"agent_cmd": "sh agent.sh", "repetitions": 5, **kw}
        request = CampaignRequest(
            task_path=TASK,
            shard=ShardSpec(index, count),
            **options,  # type: ignore[arg-type]
        )
        return campaign_shard.plan_shard(request, task, settle(request, task), frozen)

    parts = [plan(i, 2) for i in (1, 2)]
    assert parts[0].frozen_id == parts[1].frozen_id and parts[0].frozen_id.startswith("campaign-")
    assert [p.indices for p in parts] == [[1, 3, 5], [2, 4]]
    assert parts[1].run_id == f"{parts[1].frozen_id}-shard2of2"
    assert parts[1].record["units"] == [
        {"campaign": "agent", "repetition": 2},
        {"campaign": "agent", "repetition": 4},
    ]
    assert plan(1, 2, agent_cmd="sh other.sh").frozen_id != parts[0].frozen_id
    assert plan(1, 3).frozen_id != parts[0].frozen_id
    assert plan(1, 2, run_id="agents-7").frozen_id == "agents-7"


def test_cli_and_image_argv_carry_the_shard() -> None:
    args = build_parser().parse_args(
        ["campaign", "--task", "t.yaml", "--agent-cmd", "sh a.sh", "--shard", "1/2"]
    )
    assert args.shard == ShardSpec(1, 2) and args.run_id is None
    request = CampaignRequest(task_path=TASK, agent_cmd="sh a.sh", shard=ShardSpec(2, 3))
    argv = request.argv(task="/lab/t.yaml", out="/lab/artifacts")
    assert argv[-2:] == ["--shard", "2/3"]


def campaign_shard_archive(
    out: Path, signer: Signer, spec: ShardSpec, *, agent_files: dict[str, str] | None = None
) -> Path:
    """What ``lab campaign --shard`` writes: its own instrument check and baseline (the
    sample run's scenarios stand in for them), its agent runs and their directories."""
    run: RunResult = build_sample_run()
    run.options.update(mode="campaign", agent_repetitions=len(OUTCOMES), lab_version=__version__)
    mine = spec.select(campaign_shard.units(len(OUTCOMES)))
    whole = record(*(rep(i, o) for i, o in enumerate(OUTCOMES, start=1)), required=2)
    run.campaign = replace(
        whole,
        repetitions=[r for r in whole.repetitions if r.index in {u.repetition for u in mine}],
        agent_files=agent_files or whole.agent_files,
    )
    run.run_id = shard.shard_run_id("campaign-t", spec)
    run.shard = shard.shard_record(spec, mine, "campaign-t", "campaign")
    runs = {
        f"repetitions/r{r.index}/repetition.json": json.dumps(r.to_dict())
        for r in run.campaign.repetitions
    }
    extra = {"campaign/task.yaml": "name: speedup\n", **runs}
    return pack_shard(run, out, signer, ["baseline"], **extra)


def test_merged_campaign_equals_the_unsharded_one(
    tmp_path: Path,
    key: tuple[Signer, Path],  # noqa: F811
) -> None:
    signer, pub = key
    archives = [campaign_shard_archive(tmp_path / "s", signer, ShardSpec(i, 2)) for i in (1, 2)]
    outcome = merge(MergeRequest(archives=archives, pubkey=pub, out=tmp_path / "m"), say=print)
    merged = json.loads((outcome.run_dir / "results.json").read_text())
    whole = record(*(rep(i, o) for i, o in enumerate(OUTCOMES, start=1)), required=2)
    assert merged["campaign"] == json.loads(json.dumps(whole.to_dict()))
    assert merged["campaign"]["met"] == 2 and merged["campaign"]["succeeded"] is True
    for index in range(1, len(OUTCOMES) + 1):
        assert (outcome.run_dir / "repetitions" / f"r{index}" / "repetition.json").is_file()
    assert (outcome.run_dir / "campaign" / "task.yaml").is_file()
    assert [(r["index"], r["baseline_status"]) for r in merged["shards"]] == [
        (1, "pass"),
        (2, "pass"),
    ]
    assert "agent runs" in (outcome.run_dir / "report.md").read_text()
    code = main(["merge", *map(str, archives), "--pubkey", str(pub), "--out", str(tmp_path / "c")])
    assert code == 0  # 2 met, --require 2


def test_campaign_shards_of_other_agents_or_missing_refused(
    tmp_path: Path,
    key: tuple[Signer, Path],  # noqa: F811
) -> None:
    signer, pub = key
    a = campaign_shard_archive(tmp_path / "a", signer, ShardSpec(1, 2))
    b = campaign_shard_archive(tmp_path / "b", signer, ShardSpec(2, 2), agent_files={"x": "0"})
    refused([a, b], pub, tmp_path, "differ in agent files", b.name)
    refused([a], pub, tmp_path, "shard(s) 2 of 2", "missing")
