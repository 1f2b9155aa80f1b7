"""--repetitions: each repetition gets fresh state, fresh ports and a fresh source file,
keeps all its evidence, and the aggregate counts k/N."""

from __future__ import annotations

from pathlib import Path

from lab.pipeline import RunRequest, execute


def test_three_repetitions_fresh_state_and_aggregate(client: Path, tmp_path: Path) -> None:
    outcome = execute(
        RunRequest(
            names=["baseline", "redundant-upload"],
            repetitions=3,
            collector="none",
            packets="off",
            out=tmp_path,
            client=client,
            archive=False,
        ),
        say=lambda _m: None,
    )
    result = outcome.result
    base = [s for s in result.scenarios if s.name == "baseline"]
    assert [s.repetition for s in base] == [1, 2, 3]
    passes = [s.passes[0] for s in base]
    assert len({p.receiver_address for p in passes}) == 3
    assert len({p.decoy_address for p in passes}) == 3
    assert len({p.source_sha256 for p in passes}) == 3
    for s in base:
        # fresh state: the first invocation of every repetition uploads into an empty store
        first = s.passes[0].invocations[0].receiver
        assert first.held_source_at_start is False and first.payload_bytes_consumed == 524_288
        assert (outcome.run_dir / "baseline" / f"r{s.repetition}" / "result.json").exists()
    rows = {r.scenario: r for r in result.aggregate}
    assert rows["baseline"].clauses["C1"].counts["pass"] == 3
    assert rows["redundant-upload"].clauses["C2"].counts["fail"] == 3
    assert rows["baseline"].calibration.no_disagreement_repetitions == 3
    assert rows["baseline"].wording == "reliability 3/3"
    wall = rows["baseline"].wall_s
    assert wall is not None and wall.min <= wall.median
