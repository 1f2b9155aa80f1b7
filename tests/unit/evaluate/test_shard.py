"""``lab evaluate --shard I/N``: every condition × repetition unit in exactly one shard, the
same partition and shared run id in every process, the timing rounds in shard 1 only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lab._cli import build_parser, evaluation_request
from lab.errors import UsageError
from lab.evaluate import judge
from lab.evaluate.request import EvaluationRequest
from lab.evaluate.shard import plan_shard, shared_run_id
from lab.model.evaluation import EvaluationLimits, FrozenEvaluation
from lab.run.shard import ShardSpec
from lab.workloads.backup import scenario
from tests.conftest import ROOT

CONDITIONS = scenario.select(ROOT / "scenarios" / "candidate", [], True)
LIMITS = EvaluationLimits(invocation_timeout_s=30.0, build_timeout_s=300.0, timing_runs=20)


def frozen(repetitions: int) -> FrozenEvaluation:
    return judge.freeze(CONDITIONS, size=524_288, repetitions=repetitions, limits=LIMITS)


def request(tmp_path: Path, **kw: object) -> EvaluationRequest:
    patch = tmp_path / "agent.patch"
    if not patch.exists():
        patch.write_text("--- a/x\n+++ b/x\n")
    return EvaluationRequest(kind="patch", path=patch, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("repetitions", [1, 2, 3])
@pytest.mark.parametrize("count", range(1, 9))
def test_every_unit_in_exactly_one_shard(tmp_path: Path, repetitions: int, count: int) -> None:
    every = sorted((s.name, r) for s in CONDITIONS for r in range(1, repetitions + 1))
    if count > len(every):
        with pytest.raises(UsageError, match="nothing to do"):
            plan_shard(request(tmp_path, repetitions=repetitions, shard=ShardSpec(1, count)),
                       CONDITIONS, frozen(repetitions))  # fmt: skip
        return
    parts = [
        plan_shard(
            request(tmp_path, repetitions=repetitions, shard=ShardSpec(i, count)),
            CONDITIONS,
            frozen(repetitions),
        )
        for i in range(1, count + 1)
    ]
    flat = [u for p in parts for u in p.units]
    assert sorted(flat) == every and len(flat) == len(set(flat))
    assert len({p.frozen_id for p in parts}) == 1  # one run id, derived alike by every shard
    assert [p.run_id for p in parts] == [
        f"{parts[0].frozen_id}-shard{i}of{count}" for i in range(1, count + 1)
    ]
    # in the order an unsharded evaluation runs them: condition by condition
    order = [s.name for s in CONDITIONS]
    for p in parts:
        assert p.units == sorted(p.units, key=lambda u: (order.index(u[0]), u[1]))
        assert p.record["unit"] == "condition" and p.record["count"] == count
        assert [(u["condition"], u["repetition"]) for u in p.record["units"]] == sorted(p.units)
    assert [p.untimed is None for p in parts] == [i == 1 for i in range(1, count + 1)]


def _plan_in_subprocess(tmp_path: Path, seed: str) -> object:
    code = (
        "import json, sys; from pathlib import Path\n"
        "from tests.unit.evaluate.test_shard import CONDITIONS, frozen, request\n"
        "from lab.evaluate.shard import plan_shard; from lab.run.shard import ShardSpec\n"
        "tmp = Path(sys.argv[1])\n"
        "print(json.dumps({n: [[plan_shard(request(tmp, repetitions=3, shard=ShardSpec(i, n)),"
        " CONDITIONS, frozen(3)).record for i in range(1, n + 1)]] for n in range(1, 9)}))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_same_partition_and_run_id_in_every_process(tmp_path: Path) -> None:
    assert _plan_in_subprocess(tmp_path, "1") == _plan_in_subprocess(tmp_path, "2")


def test_the_shared_run_id_names_the_candidate_and_honours_run_id(tmp_path: Path) -> None:
    spec = ShardSpec(1, 2)
    base = shared_run_id(request(tmp_path), frozen(3), spec)
    assert base.startswith("eval-") and base == shared_run_id(request(tmp_path), frozen(3), spec)
    other = tmp_path / "other.patch"
    other.write_text("--- a/y\n+++ b/y\n")
    assert shared_run_id(replace(request(tmp_path), path=other), frozen(3), spec) != base
    assert shared_run_id(request(tmp_path), frozen(2), spec) != base
    assert shared_run_id(request(tmp_path, collector="none"), frozen(3), spec) != base
    assert shared_run_id(request(tmp_path), frozen(3), ShardSpec(1, 3)) != base
    assert shared_run_id(request(tmp_path, run_id="agent-7"), frozen(3), spec) == "agent-7"
    with pytest.raises(UsageError, match="--run-id"):
        shared_run_id(request(tmp_path, run_id="../x"), frozen(3), spec)


def test_cli_and_image_argv_carry_the_shard(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["evaluate", "--patch", "a.patch", "--shard", "2/3", "--run-id", "agent-7"]
    )
    made = evaluation_request(args)
    assert made.shard == ShardSpec(2, 3) and made.run_id == "agent-7"
    argv = made.argv(candidate="/lab/candidate/a.patch", out="/lab/artifacts")
    assert argv[-4:] == ["--shard", "2/3", "--run-id", "agent-7"]
    assert "--shard" not in request(tmp_path).argv(candidate="c", out="o")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["evaluate", "--patch", "a.patch", "--shard", "4/3"])
