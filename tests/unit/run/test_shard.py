"""Shards: every unit exactly once, the same partition in every process, clear refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab._cli import build_parser
from lab.errors import UsageError
from lab.run import shard
from lab.run.shard import ShardSpec, Unit
from tests.conftest import ROOT

names = st.lists(
    st.text(alphabet="abcdefghij-", min_size=1, max_size=8), min_size=1, max_size=6, unique=True
)


@given(names=names, repetitions=st.integers(1, 6), count=st.integers(1, 8))
def test_every_unit_exactly_once(names: list[str], repetitions: int, count: int) -> None:
    units = shard.work_units(names, repetitions)
    if count > len(units):
        with pytest.raises(UsageError, match="nothing to do"):
            shard.partition(units, count)
        return
    shards = shard.partition(units, count)
    flat = [u for part in shards for u in part]
    assert sorted(flat) == units and len(flat) == len(set(flat))
    assert all(part for part in shards)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1  # balanced


@given(names=names, repetitions=st.integers(1, 4), count=st.integers(1, 8))
def test_partition_ignores_input_order(names: list[str], repetitions: int, count: int) -> None:
    units = shard.work_units(names, repetitions)
    if count <= len(units):
        assert shard.partition(reversed(units), count) == shard.partition(units, count)


def _partition_in_subprocess(seed: str) -> object:
    code = (
        "import json; from lab.run import shard\n"
        "u = shard.work_units(['hash-storm', 'baseline', 'busy-spin', 'zeta'], 5)\n"
        "print(json.dumps({n: [[[x.name, x.repetition] for x in p] for p in"
        " shard.partition(u, n)] for n in range(1, 9)}))\n"
        "print(shard.frozen_run_id({'b': [1, 2], 'a': 'x'}))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return json.loads(out[0]), out[1]


def test_stable_across_processes_and_hash_seeds() -> None:
    first = _partition_in_subprocess("1")
    assert _partition_in_subprocess("2") == first
    assert _partition_in_subprocess("random") == first
    here = shard.work_units(["hash-storm", "baseline", "busy-spin", "zeta"], 5)
    partitions, frozen = first  # type: ignore[misc]
    assert partitions["3"] == [
        [[u.name, u.repetition] for u in p] for p in shard.partition(here, 3)
    ]
    assert frozen == shard.frozen_run_id({"a": "x", "b": [1, 2]})


def test_known_partition() -> None:
    units = shard.work_units(["b", "a"], 3)
    assert ShardSpec(2, 3).select(units) == [Unit("a", 2), Unit("b", 2)]
    assert ShardSpec.from_completion_index(0, 3) == ShardSpec(1, 3)


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "a/b", "1", "-1/2", "1/2/3", "1/99999"])
def test_bad_specs_refused(text: str) -> None:
    with pytest.raises(UsageError, match="--shard"):
        ShardSpec.parse(text)


def test_cli_parses_shard_and_run_id(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["run", "--all", "--shard", "2/3", "--run-id", "r-1"])
    assert args.shard == ShardSpec(2, 3) and args.run_id == "r-1"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--all", "--shard", "5/3"])
    assert "index must be 1 to 3" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "x" * 81, "-lead"])
def test_run_id_checked(bad: str) -> None:
    with pytest.raises(UsageError, match="--run-id"):
        shard.check_run_id(bad)


def test_record_and_ids() -> None:
    spec = ShardSpec(1, 2)
    record = shard.shard_record(spec, [Unit("b", 1), Unit("a", 1)], "run-x", "scenario")
    assert record["units"] == [
        {"scenario": "a", "repetition": 1},
        {"scenario": "b", "repetition": 1},
    ]
    assert Unit.from_dict(record["units"][0]) == Unit("a", 1)
    assert shard.shard_run_id("run-x", spec) == "run-x-shard1of2"
    assert shard.frozen_run_id({"a": 1}) != shard.frozen_run_id({"a": 2})
