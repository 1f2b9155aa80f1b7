"""``lab evaluate``'s instrument check kept in the evaluation's signed archive and reused by
the next evaluation under the same --out (lab.evaluate.instrument): run once, then reused
with the archive and its digest named in the record, the reports and the console, and run
again with --recalibrate or when the kept archive was changed since."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from lab import _cli
from lab.collectors.strace import StraceCollector
from tests.conftest import require
from tests.integration.test_evaluate import run_dirs


@pytest.fixture(autouse=True)
def _needs(client: Path, sandbox_ready: None) -> None:
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)


def evaluate(out: Path, client: Path, *extra: str) -> tuple[Path, dict[str, Any]]:
    """One evaluation of the seeded client as the candidate; its run directory and record."""
    before = set(run_dirs(out)) if out.exists() else set()
    code = _cli.main(
        ["evaluate", "--binary", str(client), "--local", "--repetitions", "1",
         "--timing-runs", "2", "--timing-max-runs", "2", "--collector", "strace",
         "--packets", "off", "--out", str(out), *extra]
    )  # fmt: skip
    [run_dir] = set(run_dirs(out)) - before
    results = json.loads((run_dir / "results.json").read_text())
    assert code == 0 and results["evaluation"]["status"] == "pass"
    return run_dir, results


def test_the_second_evaluation_reuses_the_first_instrument_check(
    tmp_path: Path, client: Path, capsys: Any
) -> None:
    out = tmp_path / "artifacts"
    first_dir, first = evaluate(out, client)
    kept = first["evaluation"]["instrument_check"]
    assert kept["ok"] and kept["reused_from"] is None and len(kept["key"]) == 64
    assert kept["parts"]["passes"] == ["none", "strace"] and kept["parts"]["boot_id"]
    assert (first_dir / "false-success").is_dir() and (first_dir / "unexpected-egress").is_dir()
    capsys.readouterr()

    second_dir, second = evaluate(out, client)
    again = second["evaluation"]["instrument_check"]
    archive = out / f"{first_dir.name}.tar.gz"
    assert (again["key"], again["parts"], again["caught"]) == (
        kept["key"], kept["parts"], kept["caught"],
    )  # fmt: skip
    source = again["reused_from"]
    assert source["archive"] == archive.name and source["run_id"] == first_dir.name
    assert source["archive_sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    # nothing of the check ran here: no seeded scenario in this run
    assert not (second_dir / "false-success").exists()
    assert {s["name"] for s in second["scenarios"]}.isdisjoint({"false-success"})
    said = capsys.readouterr().out
    assert f"reused from {archive.name}" in said and "--recalibrate" in said
    for report in ("report.md", "report.html"):
        text = (second_dir / report).read_text()
        assert "instrument check reused from" in text and archive.name in text, report
        assert "No seeded scenario ran in this evaluation" in text, report
    # the reused check is never kept again: the pointer still names the first archive
    pointer = json.loads((out / ".calibrations" / f"{kept['key']}.json").read_text())
    assert pointer["archive"] == archive.name

    third_dir, third = evaluate(out, client, "--recalibrate")
    assert third["evaluation"]["instrument_check"]["reused_from"] is None
    assert (third_dir / "false-success").is_dir()


def test_a_changed_kept_archive_is_not_trusted(tmp_path: Path, client: Path, capsys: Any) -> None:
    out = tmp_path / "artifacts"
    first_dir, _ = evaluate(out, client)
    archive = out / f"{first_dir.name}.tar.gz"
    archive.write_bytes(archive.read_bytes() + b"\0")
    capsys.readouterr()
    second_dir, second = evaluate(out, client)
    assert second["evaluation"]["instrument_check"]["reused_from"] is None
    assert (second_dir / "false-success").is_dir()
    assert "changed since its instrument check was kept" in capsys.readouterr().out
