"""``lab merge`` of ``lab evaluate --shard I/N``: one evaluation concluded over every shard's
condition × repetition units, with the unsharded evaluation's clause counts; shards of
another evaluation, another candidate, a missing or doubled shard refused in one sentence."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from lab import __version__
from lab._cli import main
from lab.evaluate.verdicts import CALIBRATION_SCENARIOS, clause_counts, conclude
from lab.evidence.signing import Signer
from lab.judge.aggregate import aggregate
from lab.merge.combine import MergeRequest, merge
from lab.model import RunResult
from lab.model.evaluation import Evaluation, InstrumentCheck
from lab.run.shard import ShardSpec, Unit, shard_record, shard_run_id, work_units
from tests.unit.merge.shard_archives import pack_shard, refused
from tests.unit.reports.reports_sample import SAMPLE_EVALUATION, build_sample_run

REPETITIONS = 2
Mutate = Callable[[RunResult], None]


def whole_evaluation() -> RunResult:
    """An unsharded evaluation: the instrument check's two scenarios, then six conditions
    × two repetitions (the sample run's other scenarios stand in for the conditions)."""
    run = build_sample_run()
    checks = [s for s in run.scenarios if s.name in CALIBRATION_SCENARIOS]
    judged = [s for s in run.scenarios if s.name not in CALIBRATION_SCENARIOS]
    again = [replace(copy.deepcopy(s), repetition=2) for s in judged]
    conditions = [s.name for s in judged]
    run.scenarios = checks + [s for pair in zip(judged, again, strict=True) for s in pair]
    run.options.update(
        mode="evaluate", scenarios=conditions, repetitions=REPETITIONS, lab_version=__version__
    )
    run.aggregate = aggregate(run.scenarios)
    run.evaluation = Evaluation.from_dict(copy.deepcopy(SAMPLE_EVALUATION))
    return run


def eval_shard(
    out: Path, signer: Signer, spec: ShardSpec, *, run_id: str = "eval-t", mutate: Mutate = id
) -> Path:
    """What ``lab evaluate --shard`` writes: its units, its own instrument check, shard 1
    alone timed."""
    run = whole_evaluation()
    names = run.options["scenarios"]
    mine = spec.select(work_units(names, REPETITIONS))
    run.scenarios = [
        s for s in run.scenarios if s.name not in names or Unit(s.name, s.repetition) in mine
    ]
    assert run.evaluation is not None
    if spec.index != 1:
        run.evaluation = replace(run.evaluation, timing=None, timing_skipped="timed in shard 1")
    run.run_id = shard_run_id(run_id, spec)
    run.shard = shard_record(spec, mine, run_id, "condition")
    run.aggregate = aggregate(run.scenarios)
    frozen = json.dumps(run.evaluation.frozen.to_dict(), sort_keys=True)
    mutate(run)
    extra = {"evaluation.json": frozen, "candidate/build.log": f"built in shard {spec.index}\n"}
    return pack_shard(run, out, signer, ["baseline"], **extra)


def eval_shards(tmp_path: Path, signer: Signer, count: int = 3, **kw: object) -> list[Path]:
    return [
        eval_shard(tmp_path / "s", signer, ShardSpec(i, count), **kw)  # type: ignore[arg-type]
        for i in range(1, count + 1)
    ]


def test_merged_evaluation_equals_the_unsharded_one(
    tmp_path: Path, key: tuple[Signer, Path]
) -> None:
    signer, pub = key
    archives = eval_shards(tmp_path, signer)
    outcome = merge(MergeRequest(archives=archives, pubkey=pub, out=tmp_path / "m"), say=print)
    merged = json.loads((outcome.run_dir / "results.json").read_text())
    whole_run = whole_evaluation()
    whole = json.loads(json.dumps(whole_run.to_dict()))
    assert merged["run_id"] == "eval-t"
    assert merged["scenarios"] == whole["scenarios"]  # instrument check first, then units
    assert merged["aggregate"] == whole["aggregate"]

    # the judgement concluded by the evaluation's own code over every repetition
    assert whole_run.evaluation is not None
    judged = [s for s in whole_run.scenarios if s.name not in CALIBRATION_SCENARIOS]
    expected = conclude(
        whole_run.evaluation, judged, size=524_288, timing=whole_run.evaluation.timing,
        timing_skipped=None,
    )  # fmt: skip
    evaluation = merged["evaluation"]
    assert evaluation["clauses"] == {c: k.to_dict() for c, k in clause_counts(judged).items()}
    assert evaluation["status"] == expected.status
    assert evaluation["status_reason"] == expected.status_reason
    assert evaluation["evaluation_id"] == SAMPLE_EVALUATION["evaluation_id"]
    assert evaluation["timing"] == SAMPLE_EVALUATION["timing"]  # shard 1's rounds
    assert evaluation["instrument_check"] == SAMPLE_EVALUATION["instrument_check"]
    assert {c: r["total"] for c, r in evaluation["clauses"].items()} == dict.fromkeys(
        evaluation["clauses"], 12
    )

    # the shape of an unsharded evaluation: shard 1's frozen record and candidate on top
    assert (outcome.run_dir / "evaluation.json").is_file()
    assert (outcome.run_dir / "candidate" / "build.log").read_text() == "built in shard 1\n"
    assert (outcome.run_dir / "shards" / "3" / "candidate" / "build.log").is_file()
    assert (outcome.run_dir / "false-success" / "r1" / "result.json").is_file()
    assert [(r["index"], r["timed"], r["instrument_check_ok"]) for r in merged["shards"]] == [
        (1, True, True),
        (2, False, True),
        (3, False, True),
    ]
    assert all("condition" in u for r in merged["shards"] for u in r["units"])
    md = (outcome.run_dir / "report.md").read_text()
    assert "## Shards" in md and "condition × repetition" in md and "shard(s) 1 only" in md


def test_cli_exit_status_is_the_evaluations(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    archives = eval_shards(tmp_path, signer, count=2)
    code = main(["merge", *map(str, archives), "--pubkey", str(pub), "--out", str(tmp_path / "m")])
    merged = json.loads((tmp_path / "m" / "eval-t" / "results.json").read_text())
    assert merged["evaluation"]["status"] == "fail" and code == 1


def test_a_refusal_in_any_shard_refuses_the_evaluation(
    tmp_path: Path, key: tuple[Signer, Path]
) -> None:
    signer, pub = key

    def blind(run: RunResult) -> None:
        assert run.evaluation is not None
        check = InstrumentCheck(
            scenarios=CALIBRATION_SCENARIOS,
            caught={"false-success": {"C1": "pass", "C6": "fail"}, "unexpected-egress": {}},
            ok=False,
        )
        run.evaluation = replace(
            run.evaluation, status="refused", clauses=None, timing=None, instrument_check=check
        )
        run.scenarios = [s for s in run.scenarios if s.name in CALIBRATION_SCENARIOS]

    a = eval_shard(tmp_path / "a", signer, ShardSpec(1, 2))
    b = eval_shard(tmp_path / "b", signer, ShardSpec(2, 2), mutate=blind)
    outcome = merge(MergeRequest(archives=[a, b], pubkey=pub, out=tmp_path / "m"), say=print)
    evaluation = outcome.result.evaluation
    assert evaluation is not None and evaluation.status == "refused"
    assert evaluation.status_reason is not None and "shard 2/2" in evaluation.status_reason
    assert evaluation.clauses is None and evaluation.instrument_check is not None


def test_shards_of_different_evaluation_ids_refused(
    tmp_path: Path, key: tuple[Signer, Path]
) -> None:
    signer, pub = key

    def other_contract(run: RunResult) -> None:
        assert run.evaluation is not None
        frozen = replace(run.evaluation.frozen, evaluation_id="eval-ffffffffffffffff")
        run.evaluation = replace(run.evaluation, frozen=frozen)

    a = eval_shard(tmp_path / "a", signer, ShardSpec(1, 2))
    b = eval_shard(tmp_path / "b", signer, ShardSpec(2, 2), mutate=other_contract)
    refused([a, b], pub, tmp_path, "differ in evaluation id", "eval-ffffffffffffffff", b.name)


def test_shards_of_different_candidates_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key

    def other_patch(run: RunResult) -> None:
        assert run.evaluation is not None
        candidate = replace(run.evaluation.candidate, input_sha256="0" * 64)
        run.evaluation = replace(run.evaluation, candidate=candidate)

    a = eval_shard(tmp_path / "a", signer, ShardSpec(1, 2))
    b = eval_shard(tmp_path / "b", signer, ShardSpec(2, 2), mutate=other_patch)
    refused([a, b], pub, tmp_path, "differ in candidate", "one candidate only")


def test_missing_evaluation_shard_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    archives = eval_shards(tmp_path, signer)
    refused([archives[0], archives[2]], pub, tmp_path, "shard(s) 2 of 3", "eval-t", "missing")


def test_duplicate_evaluation_shard_index_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    archives = eval_shards(tmp_path, signer, count=2)
    twin = eval_shard(tmp_path / "twin", signer, ShardSpec(2, 2), run_id="eval-t")
    renamed = twin.with_name("again-" + twin.name)
    twin.rename(renamed)
    refused([*archives, renamed], pub, tmp_path, "both shard 2/2", renamed.name)


def test_an_evaluation_shard_and_a_run_shard_refused(
    tmp_path: Path, key: tuple[Signer, Path]
) -> None:
    signer, pub = key

    def not_an_evaluation(run: RunResult) -> None:
        run.evaluation = None

    a = eval_shard(tmp_path / "a", signer, ShardSpec(1, 2))
    b = eval_shard(tmp_path / "b", signer, ShardSpec(2, 2), mutate=not_an_evaluation)
    refused([a, b], pub, tmp_path, "differ in kind", "never a mix")
