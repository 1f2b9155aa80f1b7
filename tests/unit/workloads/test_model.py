"""A task evaluation's counts and status: a clause passes only when it passed in every
repetition; not-observed is never a pass; the record round-trips."""

from __future__ import annotations

from lab.model.task import CandidateInfo, RepetitionJudgement, TaskEvaluation, Verdict


def _cand(**kw: object) -> CandidateInfo:
    base: dict[str, object] = {
        "kind": "patch",
        "name": "x.patch",
        "sha256": "0" * 64,
        "files_changed": ("a.go",),
        "outside_editable": (),
        "protected_changed": (),
    }
    base.update(kw)
    return CandidateInfo(**base)  # type: ignore[arg-type]


def _rep(index: int, **verdicts: str) -> RepetitionJudgement:
    return RepetitionJudgement(
        index=index,
        commands={},
        oracle=None,
        verdicts={c: Verdict(v, f"{c} was {v}") for c, v in verdicts.items()},  # type: ignore[arg-type]
    )


def test_pass_only_when_every_repetition_passed() -> None:
    judged = TaskEvaluation(
        task={},
        candidate=_cand(),
        repetitions=[_rep(1, S1="pass", S3="pass"), _rep(2, S1="pass", S3="fail")],
    )
    judged.conclude(("S1", "S3"))
    assert judged.status == "fail" and judged.status_reason == "S3 fail: S3 was fail"
    assert judged.clauses is not None
    assert judged.clauses["S3"].to_dict() == {
        "pass": 1,
        "fail": 1,
        "not-observed": 0,
        "not-exercised": 0,
        "total": 2,
    }


def test_not_observed_is_not_a_pass_and_a_missing_verdict_is_not_observed() -> None:
    judged = TaskEvaluation(task={}, candidate=_cand(), repetitions=[_rep(1, S1="pass")])
    judged.conclude(("S1", "S5"))
    assert judged.status == "fail"
    assert judged.clauses is not None and judged.clauses["S5"].not_observed == 1


def test_a_patch_that_does_not_apply_fails_and_round_trips() -> None:
    judged = TaskEvaluation(task={"name": "t"}, candidate=_cand(problem="the patch does not apply"))
    judged.conclude(("S1",))
    assert judged.status == "fail" and judged.status_reason == "the patch does not apply"
    again = TaskEvaluation.from_dict(judged.to_dict())
    assert again.to_dict() == judged.to_dict()


def test_findings_name_protected_and_out_of_scope_changes() -> None:
    cand = _cand(protected_changed=("store_test.go",), outside_editable=("go.sum",))
    assert cand.findings() == [
        "protected file store_test.go was changed (restored before judging)",
        "go.sum changed, and it is not an editable file",
    ]
