"""lab.model.evaluation: the typed evaluation record writes exactly the JSON it always did."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from lab.model.evaluation import (
    BuildRecord,
    CandidateRecord,
    ClientTiming,
    Evaluation,
    EvaluationLimits,
    Fixture,
    FrozenEvaluation,
    MakeStep,
    PatchStep,
    Spread,
    Timing,
)
from lab.reports.evaluation import evaluation_other_rows, evaluation_timing_table
from lab.reports.table import fmt_spread
from lab.schemas import validate_results
from tests.unit.reports.reports_sample import SAMPLE_EVALUATION, build_repeated_run

FROZEN = FrozenEvaluation(
    evaluation_id="eval-0123456789abcdef",
    lab_version="0.1.0",
    files={"lab/workloads/backup/contract.py": "ab" * 32},
    fixture=Fixture(generator="shake_256 lab-fixture-v1", size=524_288),
    repetitions=3,
    limits=EvaluationLimits(invocation_timeout_s=60.0, build_timeout_s=300.0, timing_runs=20),
)


def test_the_sample_round_trips() -> None:
    data = copy.deepcopy(SAMPLE_EVALUATION)
    evaluation = Evaluation.from_dict(data)
    assert evaluation.to_dict() == data
    assert evaluation.clauses is not None and evaluation.clauses["C2"].failed == 1
    assert evaluation.timing is not None and evaluation.timing.ratio is not None
    assert evaluation.timing.ratio["first_backup_wall"] == 0.8298
    assert evaluation.extra == {"workspace": "/tmp/lab-candidate-xyz/native"}


def test_results_json_still_validates() -> None:
    document = json.loads(json.dumps(build_repeated_run().to_dict()))
    validate_results(document)
    assert document["evaluation"] == SAMPLE_EVALUATION


def test_a_build_failure_records_only_what_happened() -> None:
    build = BuildRecord(
        status="build-failed",
        patch=PatchStep(exit_status=0, applied_in="repository root"),
        make=MakeStep(
            exit_status=0,
            timed_out=False,
            duration_s=1.5,
            log="candidate/build.log",
            stderr="candidate/build.err",
        ),
        why="make succeeded but produced no executable backup-client",
    )
    candidate = CandidateRecord(
        kind="patch", input_name="a.patch", input_sha256="cd" * 32, binary_sha256=None, build=build
    )
    evaluation = Evaluation(
        frozen=FROZEN, candidate=candidate, status="build-failed", status_reason="see its log"
    )
    data = evaluation.to_dict()
    assert set(data) == {*FROZEN.to_dict(), "candidate", "status", "status_reason"}
    assert data["candidate"]["build"] == {
        "patch_exit_status": 0,
        "patch_applied_in": "repository root",
        "exit_status": 0,
        "timed_out": False,
        "duration_s": 1.5,
        "log": "candidate/build.log",
        "stderr": "candidate/build.err",
        "status": "build-failed",
        "why": "make succeeded but produced no executable backup-client",
    }
    assert Evaluation.from_dict(data) == evaluation
    assert BuildRecord(status="prebuilt").to_dict() == {"status": "prebuilt"}


def _timing(ratio: dict[str, float | None] | None, floor_median: float | None = None) -> Timing:
    one = Spread(median=0.01, min=0.01, max=0.01, n=2)
    metrics = ("first_backup_wall", "first_backup_cpu", "unchanged_wall", "unchanged_cpu")
    clients = {
        name: ClientTiming(spreads=dict.fromkeys(metrics, one), nonzero_exits=0)
        for name in ("baseline", "candidate")
    }
    if floor_median is None:
        return Timing(rounds=2, size=1024, method="untraced", clients=clients, ratio=ratio)
    low = Spread(median=floor_median, min=floor_median, max=floor_median, n=2)
    clients["floor"] = ClientTiming(spreads=dict.fromkeys(metrics, low), nonzero_exits=0)
    identity: dict[str, str | None] = {"binary_sha256": "abc", "reason": None}
    return Timing(
        rounds=2, size=1024, method="untraced", clients=clients, ratio=ratio, floor=identity
    )


def test_the_report_reads_the_stored_ratio_and_never_recomputes_it() -> None:
    evaluation = Evaluation.from_dict(copy.deepcopy(SAMPLE_EVALUATION))
    stored = replace(evaluation, timing=_timing({"first_backup_wall": 0.5}))
    table = evaluation_timing_table(stored)
    assert table is not None
    # equal medians would give 1.00x: the table shows what lab.evaluate.timing stored
    ratio = table.header.index("ratio")
    assert table.rows[0][ratio] == "0.50x"
    assert [row[ratio] for row in table.rows[1:]] == ["N/A", "N/A", "N/A"]
    unstored = evaluation_timing_table(replace(evaluation, timing=_timing(None)))
    assert unstored is not None and {row[ratio] for row in unstored.rows} == {"N/A"}
    assert "ratio" not in _timing(None).to_dict()


def test_the_instrument_floor_stands_beside_the_ratio() -> None:
    evaluation = Evaluation.from_dict(copy.deepcopy(SAMPLE_EVALUATION))
    timing = _timing({"first_backup_wall": 1.0}, floor_median=0.004)
    table = evaluation_timing_table(replace(evaluation, timing=timing))
    assert table is not None
    column = table.header.index("instrument floor median (range)")
    assert column == table.header.index("ratio") + 1
    assert all(row[column] != "not recorded" for row in table.rows)
    note = next(n for n in table.notes if n.startswith("Instrument floor"))
    assert "40% of the baseline's first-backup wall" in note and "abc" in note
    assert timing.floor_share("first_backup_wall") == pytest.approx(0.4)
    assert Timing.from_dict(timing.to_dict()) == timing


def test_a_missing_floor_says_why_rather_than_showing_a_zero() -> None:
    evaluation = Evaluation.from_dict(copy.deepcopy(SAMPLE_EVALUATION))
    missing = replace(_timing(None), floor={"reason": "no C compiler (cc) on PATH"})
    table = evaluation_timing_table(replace(evaluation, timing=missing))
    assert table is not None
    column = table.header.index("instrument floor median (range)")
    assert {row[column] for row in table.rows} == {fmt_spread(None)}
    assert "Instrument floor: not measured (no C compiler (cc) on PATH)." in table.notes
    assert missing.floor_share("first_backup_wall") is None


def test_unknown_fields_are_kept_and_listed() -> None:
    data = {**copy.deepcopy(SAMPLE_EVALUATION), "agent": {"model": "x", "turns": 3}}
    evaluation = Evaluation.from_dict(data)
    assert evaluation.to_dict() == data
    assert dict(evaluation_other_rows(evaluation))["agent"] == '{"model": "x", "turns": 3}'
