"""The reports rendered from stored ``results.json`` documents are the goldens, byte for byte
(``golden.py`` says how they were made and how to regenerate them deliberately)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.reports.golden import ASSETS, DOCUMENTS, GOLDEN, read_run, render_all


@pytest.mark.parametrize("name", DOCUMENTS)
def test_reports_are_byte_identical_to_the_goldens(name: str, tmp_path: Path) -> None:
    rendered = render_all(read_run(name), tmp_path)
    assert sorted(rendered) == ["console.txt", "report.md", "report.pdf", "summary.json"]
    for file, data in rendered.items():
        golden = GOLDEN / f"{name}.{file}"
        assert data == golden.read_bytes(), f"{file} of {name} differs from {golden}"


@pytest.mark.parametrize("name", DOCUMENTS)
def test_results_json_keeps_its_shape_when_read_back(name: str) -> None:
    stored = json.loads((ASSETS / f"{name}-results.json").read_text())
    assert json.loads(json.dumps(read_run(name).to_dict())) == stored


def test_a_changed_figure_changes_the_report(tmp_path: Path) -> None:
    """The comparison can fail: one figure of the model changed, report.md differs."""
    run = read_run("sample")
    run.started_at = "2026-11-29T16:13:40.000Z"
    assert render_all(run, tmp_path)["report.md"] != (GOLDEN / "sample.report.md").read_bytes()
