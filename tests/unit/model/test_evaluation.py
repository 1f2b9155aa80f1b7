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


def test_failed_timing_rounds_round_trip_and_are_shown() -> None:
    failed = ClientTiming(
        spreads={"first_backup_wall": None},
        nonzero_exits=0,
        failed_rounds=2,
        failures=("first_backup: no backup in the receiver's store",) * 2,
    )
    assert ClientTiming.from_dict(failed.to_dict()) == failed
    # a client with none failed writes what it always did
    assert "failed_rounds" not in replace(failed, failed_rounds=0, failures=()).to_dict()


def test_every_sandbox_bound_is_a_frozen_limit() -> None:
    from lab.model.evaluation import EvaluationLimits
    from lab.sandbox import SandboxSettings

    bounds = SandboxSettings().to_dict()
    limits = EvaluationLimits(
        invocation_timeout_s=30.0, build_timeout_s=300.0, timing_runs=20, sandbox=bounds
    )
    written = limits.to_dict()
    for key in ("pids_max", "memory_max", "disk_max", "disk_inodes_max", "output_head_bytes",
                "output_tail_bytes", "linger_grace_s", "invocation_timeout_s"):  # fmt: skip
        assert key in written, key
    assert EvaluationLimits.from_dict(written) == limits
    # a record frozen before the bounds were reads back as it was written
    old = {"invocation_timeout_s": 30.0, "build_timeout_s": 300.0, "timing_runs": 20}
    assert EvaluationLimits.from_dict(old).to_dict() == old


def test_the_documented_time_limit_is_the_one_evaluate_uses() -> None:
    from pathlib import Path

    from lab._parser import build_parser

    doc = (Path(__file__).resolve().parents[3] / "docs" / "client-contract.md").read_text()
    doc = " ".join(doc.split())
    args = build_parser().parse_args(["evaluate", "--binary", "x"])
    assert f"`lab evaluate`: {args.timeout:g} s" in doc


def test_every_ratio_has_its_interval_column_and_round_trips() -> None:
    evaluation = Evaluation.from_dict(copy.deepcopy(SAMPLE_EVALUATION))
    timing = replace(
        _timing({"first_backup_wall": 0.5, "unchanged_wall": None}),
        ratio_interval={"first_backup_wall": [0.45, 0.56], "unchanged_wall": None},
        interval_method="paired percentile bootstrap (test)",
    )
    table = evaluation_timing_table(replace(evaluation, timing=timing))
    assert table is not None
    column = table.header.index("ratio 95% interval")
    assert [row[column] for row in table.rows] == ["0.45x - 0.56x", "N/A", "N/A", "N/A"]
    assert any("paired percentile bootstrap (test)" in n for n in table.notes)
    assert Timing.from_dict(timing.to_dict()) == timing
    # a record timed before intervals existed says so, never shows a made-up one
    old = evaluation_timing_table(replace(evaluation, timing=_timing({"first_backup_wall": 0.5})))
    assert old is not None and any("not computed" in n for n in old.notes)


def test_the_share_above_the_floor_has_a_row_of_its_own() -> None:
    evaluation = Evaluation.from_dict(copy.deepcopy(SAMPLE_EVALUATION))
    timing = replace(
        _timing({"first_backup_wall": 0.9, "first_backup_wall_above_floor": 0.5}, 0.004),
        ratio_interval={"first_backup_wall_above_floor": [0.41, 0.62]},
        interval_method="paired percentile bootstrap (test)",
    )
    table = evaluation_timing_table(replace(evaluation, timing=timing))
    assert table is not None
    row = table.rows[-1]
    assert row[0] == "first backup, wall above the floor"
    assert row[table.header.index("ratio")] == "0.50x"
    assert row[table.header.index("ratio 95% interval")] == "0.41x - 0.62x"


def test_the_rounds_rule_round_trips_and_old_records_have_none() -> None:
    from lab.model.evaluation import EvaluationLimits, RoundsRule

    rule = RoundsRule(
        min_rounds=12,
        max_rounds=36,
        target_half_width=0.05,
        metrics=("first_backup_wall", "first_backup_cpu"),
        stopped="target",
        half_widths={"first_backup_wall": 0.031, "first_backup_cpu": None},
    )
    timing = Timing(rounds=16, size=1024, method="untraced", clients={}, rounds_rule=rule)
    again = Timing.from_dict(timing.to_dict())
    assert again == timing and again.rounds_rule is not None
    assert "16 rounds (at least 12, at most 36" in again.rounds_rule.sentence(16)
    assert "first_backup_wall ±3.1 %" in again.rounds_rule.sentence(16)
    old = timing.to_dict()
    del old["rounds_rule"]
    assert Timing.from_dict(old).rounds_rule is None

    limits = EvaluationLimits(
        invocation_timeout_s=15.0,
        build_timeout_s=600.0,
        timing_runs=12,
        timing_max_runs=36,
        timing_target_half_width=0.05,
        timing_metrics=("first_backup_wall",),
        sandbox={"pids_max": 256},
    )
    assert EvaluationLimits.from_dict(limits.to_dict()) == limits
    # a record frozen before the rule: its timing ran exactly timing_runs, and none of the
    # rule's keys is taken for a sandbox bound
    before = {"invocation_timeout_s": 30.0, "build_timeout_s": 600.0, "timing_runs": 20}
    read = EvaluationLimits.from_dict(before | {"pids_max": 256})
    assert read.timing_max_runs is None and read.sandbox == {"pids_max": 256}
    assert read.to_dict() == before | {"pids_max": 256}


def test_the_table_names_the_metrics_only_the_least_rounds_timed() -> None:
    from lab.model.timing import RoundsRule

    evaluation = Evaluation.from_dict(copy.deepcopy(SAMPLE_EVALUATION))
    # the sample's rule: the rounds after the least 12 timed the clients' first backup alone
    rule = RoundsRule.from_dict(SAMPLE_EVALUATION["timing"]["rounds_rule"])
    timing = replace(
        _timing({"first_backup_wall": 1.0}, floor_median=0.004), rounds=36, rounds_rule=rule
    )
    table = evaluation_timing_table(replace(evaluation, timing=timing))
    assert table is not None
    labels = [row[0] for row in table.rows]
    assert labels[:2] == ["first backup, wall", "first backup, CPU"]
    assert labels[2:4] == [
        "unchanged second run, wall, first 12 rounds",
        "unchanged second run, CPU, first 12 rounds",
    ]
    note = next(n for n in table.notes if n.startswith("Instrument floor"))
    assert "It ran in the first 12 rounds" in note
    # a timing that stopped at the least rounds timed everything in every round
    least = replace(timing, rounds=12)
    table = evaluation_timing_table(replace(evaluation, timing=least))
    assert table is not None and not any("first 12" in row[0] for row in table.rows)
