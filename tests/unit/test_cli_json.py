"""``--json`` on ``lab run`` and ``lab evaluate``: one JSON document on stdout, matching its
schema in lab/schemas/, the human text on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lab import _cli
from lab.evaluate import judge
from lab.evidence.archive import ArchiveInfo
from lab.schemas import SUMMARY_SCHEMAS, validate_document
from tests.conftest import ROOT
from tests.unit.reports.reports_sample import build_repeated_run

SCHEMAS = ROOT / "lab" / "schemas"


def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return schema


@pytest.mark.parametrize("name", SUMMARY_SCHEMAS)
def test_the_schemas_are_valid_draft_2020_12(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(_schema(name))


def _run_json(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = ["run", "baseline", "--sandbox", "off", "--collector", "none", "--packets", "off"]
    return subprocess.run(
        [sys.executable, "-m", "lab", *argv, "--json", "--out", str(tmp_path), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_run_json_is_one_document_matching_its_schema(tmp_path: Path) -> None:
    done = _run_json(tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # the whole of stdout is one document
    jsonschema.Draft202012Validator(_schema("run-summary")).validate(document)
    assert document["kind"] == "run" and document["ok"] is True and document["exit_status"] == 0
    assert "not: every backup was correct" in document["exit_meaning"]
    assert [row["scenario"] for row in document["scenarios"]] == ["baseline"]
    assert document["scenarios"][0]["reliability"] == "capability demonstrated"
    archive = document["archive"]
    assert Path(archive["path"]).is_file() and archive["key_id"] == document["signing_key_id"]
    digest = Path(archive["checksum_file"]).read_text().split()[0]
    assert digest == archive["sha256"]
    results = json.loads((Path(document["run_dir"]) / "results.json").read_text())
    assert results["run_id"] == document["run_id"]
    assert results["calibration"] == document["calibration"]
    # the human text went to stderr, and the same figures are in it
    assert "Calibration:" in done.stderr and archive["sha256"] in done.stderr


def test_run_json_without_an_archive(tmp_path: Path) -> None:
    done = _run_json(tmp_path, "--no-archive")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    validate_document(document, "run-summary")
    assert document["archive"] is None and document["signing_key_id"] is None


def _archive_info(tmp_path: Path) -> ArchiveInfo:
    return ArchiveInfo(
        run_dir=tmp_path / "eval-1",
        path=tmp_path / "eval-1.tar.gz",
        sha256="ab" * 32,
        checksum_file=tmp_path / "eval-1.tar.gz.sha256",
        checksum_sig=tmp_path / "eval-1.tar.gz.sha256.sig",
        files=12,
        key_id="0123456789ABCDEF",
        ephemeral=False,
    )


def test_evaluate_json_is_one_document_matching_its_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = build_repeated_run()  # a real results model with a candidate evaluation
    assert run.evaluation is not None

    def fake_execute(request: object, *, say: Any) -> judge.EvaluationOutcome:
        say("Candidate (binary): prebuilt")
        return judge.EvaluationOutcome(
            exit_status=1,
            evaluation=run.evaluation,
            result=run,
            run_dir=tmp_path / "eval-1",
            archive=_archive_info(tmp_path),
        )

    monkeypatch.setattr(judge, "execute", fake_execute)
    code = _cli.main(["evaluate", "--binary", str(tmp_path / "c"), "--local", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    document = json.loads(out)
    jsonschema.Draft202012Validator(_schema("evaluation-summary")).validate(document)
    assert document["ok"] is False and document["delegated_to_image"] is False
    evaluation = document["evaluation"]
    assert evaluation["evaluation_id"] == run.evaluation.evaluation_id
    assert evaluation["clauses"]["C2"]["fail"] == 1
    assert evaluation["timing"]["first_backup_wall_ratio"] == 0.8298
    assert evaluation["timing"]["ratio"]["first_backup_wall"] == 0.8298
    assert evaluation["timing"]["ratio_interval"]["first_backup_wall"] == [0.7712, 0.8907]
    assert evaluation["timing"]["ratio_interval"]["unchanged_cpu"] is None
    assert "bootstrap" in evaluation["timing"]["interval_method"]
    # what the rounds after the least timed is in --json, as in results.json
    later = evaluation["timing"]["rounds_rule"]["later_rounds"]
    assert later == {"baseline": ["first_backup"], "candidate": ["first_backup"]}
    assert document["signing_key_id"] == "0123456789ABCDEF"
    assert document["run"]["calibration"] == run.calibration.to_dict()
    assert "Candidate (binary)" in err and "Evaluation" in err


def test_evaluate_json_passes_on_the_images_own_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Delegated to the image, ``--json`` is asked of the lab there and its document (the
    evaluation's verdict, host paths) comes back, marked as delegated."""
    from lab.reports.summary import evaluation_summary

    run = build_repeated_run()
    assert run.evaluation is not None
    inner = evaluation_summary(  # what the lab in the image printed, paths already rewritten
        exit_status=1,
        evaluation=run.evaluation,
        result=run,
        run_dir=tmp_path / "eval-1",
        archive=_archive_info(tmp_path),
    )
    asked: list[bool] = []

    def fake_execute(request: Any, *, say: Any) -> judge.EvaluationOutcome:
        asked.append(request.json)
        return judge.EvaluationOutcome(exit_status=1, document=json.loads(json.dumps(inner)))

    monkeypatch.setattr(judge, "execute", fake_execute)
    assert _cli.main(["evaluate", "--patch", "x.patch", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    validate_document(document, "evaluation-summary")
    assert asked == [True]
    assert document["delegated_to_image"] is True
    assert document["evaluation"]["evaluation_id"] == run.evaluation.evaluation_id
    assert document["run_dir"] == str(tmp_path / "eval-1")


def test_evaluate_json_when_the_image_wrote_no_document(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        judge, "execute", lambda request, *, say: judge.EvaluationOutcome(exit_status=2)
    )
    assert _cli.main(["evaluate", "--patch", "x.patch", "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    validate_document(document, "evaluation-summary")
    assert document["delegated_to_image"] is True and document["evaluation"] is None
    assert document["ok"] is False


def test_a_document_that_breaks_its_schema_is_a_lab_bug() -> None:
    from lab.errors import SchemaError

    with pytest.raises(SchemaError, match=r"lab/schemas/run-summary\.schema\.json at"):
        validate_document({"kind": "nope"}, "run-summary")
