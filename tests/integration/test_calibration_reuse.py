"""A fixture task's calibration kept in its run's archive and reused by the next run under
the same --out only when every input matches (lab.workloads.calcache), with the test-only
``shell`` task (no toolchain, fast): shown as reused with the archive and its digest,
judged again with --recalibrate, after a seed changes, or when the kept archive was
changed since.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from tests.integration.test_fixture_tasks import SHELL, lab, results, run_dir_of


def evaluate(task: Path, out: Path, *extra: str) -> dict[str, Any]:
    patch = SHELL / "seeds" / "correct.patch"
    code, doc = lab("evaluate", "--task", str(task), "--patch", str(patch), "--out", str(out),
                    *extra)  # fmt: skip
    assert code == 0 and doc["status"] == "pass"
    return doc


def test_the_second_evaluation_reuses_the_first_calibration(tmp_path: Path) -> None:
    first = evaluate(SHELL / "task.yaml", tmp_path)
    kept = results(first)["calibration"]
    assert kept["reused_from"] is None and len(kept["key"]) == 64
    assert (run_dir_of(first) / "calibration").is_dir()
    second = evaluate(SHELL / "task.yaml", tmp_path)
    again = results(second)
    reused = again["calibration"]["reused_from"]
    assert again["calibration"]["key"] == kept["key"] and again["calibration"]["met"] == 3
    assert reused["archive"] == Path(first["archive"]).name
    assert (
        reused["archive_sha256"] == hashlib.sha256(Path(first["archive"]).read_bytes()).hexdigest()
    )
    assert (
        again["evaluation"]["calibration"]["seeds"]
        == results(first)["evaluation"]["calibration"]["seeds"]
    )
    assert not (run_dir_of(second) / "calibration").exists()  # no seed judged here
    report = (run_dir_of(second) / "report.md").read_text()
    assert "Reused, not judged in this run" in report and reused["archive"] in report
    forced = evaluate(SHELL / "task.yaml", tmp_path, "--recalibrate")
    assert results(forced)["calibration"]["reused_from"] is None
    assert (run_dir_of(forced) / "calibration").is_dir()


def test_a_changed_seed_is_judged_again(tmp_path: Path) -> None:
    task = tmp_path / "task"
    shutil.copytree(SHELL, task)
    evaluate(task / "task.yaml", tmp_path / "out")
    with (task / "seeds" / "correct.patch").open("a") as patch:
        patch.write("\n")  # the same change, another file: another key
    doc = evaluate(task / "task.yaml", tmp_path / "out")
    assert results(doc)["calibration"]["reused_from"] is None


def test_a_kept_archive_changed_since_is_not_trusted(tmp_path: Path, capsys: Any) -> None:
    first = evaluate(SHELL / "task.yaml", tmp_path)
    archive = Path(first["archive"])
    archive.write_bytes(archive.read_bytes() + b"\0")
    capsys.readouterr()
    doc = evaluate(SHELL / "task.yaml", tmp_path)
    assert results(doc)["calibration"]["reused_from"] is None
    assert "changed since its calibration was kept" in capsys.readouterr().err
