"""EvaluationRequest: the CLI parses arguments into it; it is frozen; it rebuilds the argv."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lab._cli import build_parser, evaluation_request
from lab.evaluate.request import EvaluationRequest


@pytest.mark.parametrize(
    ("flag", "kind"), [("--patch", "patch"), ("--source-dir", "source-dir"), ("--binary", "binary")]
)
def test_the_cli_builds_the_request(flag: str, kind: str) -> None:
    args = build_parser().parse_args(
        ["evaluate", flag, "x", "--repetitions", "5", "--size", "8K", "--local", "--out", "o"]
    )
    request = evaluation_request(args)
    assert request == EvaluationRequest(
        kind=kind,  # type: ignore[arg-type]
        path=Path("x"),
        repetitions=5,
        size=8192,
        local=True,
        out=Path("o"),
    )
    assert request.flag == flag


def test_defaults_match_the_cli() -> None:
    parsed = evaluation_request(build_parser().parse_args(["evaluate", "--binary", "b"]))
    assert parsed == EvaluationRequest(kind="binary", path=Path("b"))


def test_frozen_and_keyword_only() -> None:
    request = EvaluationRequest(kind="patch", path=Path("a.patch"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.repetitions = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        EvaluationRequest("patch", Path("a.patch"))  # type: ignore[misc]


@pytest.mark.parametrize("recalibrate", [False, True])
def test_argv_round_trips_through_the_parser(recalibrate: bool) -> None:
    request = EvaluationRequest(
        kind="source-dir",
        path=Path("/src"),
        repetitions=2,
        timing_runs=4,
        packets="off",
        recalibrate=recalibrate,
    )
    argv = request.argv(candidate="/lab/candidate/src", out="/lab/artifacts")
    assert ("--recalibrate" in argv) is recalibrate  # the image's evaluation checks again too
    again = evaluation_request(build_parser().parse_args(argv))
    assert again == dataclasses.replace(
        request, path=Path("/lab/candidate/src"), out=Path("/lab/artifacts")
    )


def test_the_timing_rounds_cap_defaults_to_five_times_the_least() -> None:
    request = EvaluationRequest(kind="binary", path=Path("x"), timing_runs=12)
    assert request.timing_cap == 60 and "--timing-max-runs" not in request.argv(
        candidate="/c", out="/o"
    )
    args = build_parser().parse_args(["evaluate", "--binary", "x", "--timing-max-runs", "20"])
    asked = evaluation_request(args)
    assert (asked.timing_runs, asked.timing_max_runs, asked.timing_cap) == (12, 20, 20)
    again = evaluation_request(build_parser().parse_args(asked.argv(candidate="x", out="o")))
    assert again.timing_max_runs == 20


def test_a_cap_below_the_least_rounds_is_refused_in_one_sentence() -> None:
    from lab.errors import UsageError

    with pytest.raises(UsageError) as caught:
        EvaluationRequest(kind="binary", path=Path("x"), timing_max_runs=4).check_timing()
    assert str(caught.value) == (
        "--timing-max-runs 4 must be at least --timing-runs (12); give the same number for "
        "exactly that many rounds."
    )
