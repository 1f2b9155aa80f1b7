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


def test_argv_round_trips_through_the_parser() -> None:
    request = EvaluationRequest(
        kind="source-dir", path=Path("/src"), repetitions=2, timing_runs=4, packets="off"
    )
    argv = request.argv(candidate="/lab/candidate/src", out="/lab/artifacts")
    again = evaluation_request(build_parser().parse_args(argv))
    assert again == dataclasses.replace(
        request, path=Path("/lab/candidate/src"), out=Path("/lab/artifacts")
    )
