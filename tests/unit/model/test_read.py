"""results.json read back: the loaded model writes the same document, and the judges'
aggregate over it equals the aggregate stored beside it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab.judge.aggregate import aggregate
from lab.model import RunResult
from tests.unit.reports.reports_sample import (
    build_degraded_run,
    build_repeated_run,
    build_sample_run,
)


def _roundtrip(document: dict[str, object]) -> dict[str, object]:
    return json.loads(json.dumps(RunResult.from_dict(document).to_dict()))


@pytest.mark.parametrize("build", [build_sample_run, build_degraded_run, build_repeated_run])
def test_load_inverts_to_dict(build: object) -> None:
    run = build()  # type: ignore[operator]
    assert isinstance(run, RunResult)
    document = json.loads(json.dumps(run.to_dict()))
    assert _roundtrip(document) == document


def test_aggregate_of_loaded_scenarios_equals_the_stored_one() -> None:
    document = json.loads(json.dumps(build_repeated_run().to_dict()))
    loaded = RunResult.from_dict(document)
    rows = [row.to_dict() for row in aggregate(loaded.scenarios)]
    assert json.loads(json.dumps(rows)) == document["aggregate"]
    # and the stored rows read back as the same typed aggregate
    assert loaded.aggregate == aggregate(loaded.scenarios)


def test_shard_records_round_trip() -> None:
    run = build_sample_run()
    run.shard = {"index": 1, "count": 2, "run_id": "r", "unit": "scenario", "units": []}
    document = json.loads(json.dumps(run.to_dict()))
    assert _roundtrip(document)["shard"] == run.shard


@pytest.mark.parametrize("bad", [[], {"run_id": "x"}, {"run_id": "x", "started_at": "t"}])
def test_malformed_documents_raise_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        RunResult.from_dict(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("clauses", ["C1"]),
        ("clauses", {"C1": "pass"}),
        ("calibration", 7),
    ],
)
def test_a_malformed_aggregate_row_is_a_value_or_type_error(where: str, value: Any) -> None:
    """lab merge turns ValueError/TypeError/KeyError into one sentence naming the shard; any
    other exception would reach the user as a traceback."""
    document = json.loads(json.dumps(build_repeated_run().to_dict()))
    document["aggregate"][0][where] = value
    with pytest.raises((ValueError, TypeError)):
        RunResult.from_dict(document)


def test_malformed_cgroup_stats_are_a_value_error() -> None:
    document = json.loads(json.dumps(build_sample_run().to_dict()))
    inv = document["scenarios"][0]["passes"][0]["invocations"][0]
    inv["sandbox"]["stats"] = ["cpu_usage_s", 1]
    with pytest.raises(ValueError, match=r"sandbox\.stats is not an object"):
        RunResult.from_dict(document)
