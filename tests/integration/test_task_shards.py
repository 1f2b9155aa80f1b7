"""A fixture task's campaign sharded 1/2 and 2/2 on this host (--local) and merged: each
shard conducts only its repetitions from the same baseline commit under the same
calibration key and evaluation id, and ``lab merge`` gives the campaign of the unsharded
shape (k of N over all repetitions, each repetition's evidence under repetitions/rN/, the
shards record), signed with the trusted key. The shell task (tests/assets/tasks/shell) is
fast: no toolchain."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lab import _cli, intervals
from lab.evidence.keys import generate_keypair
from lab.evidence.verify import verify_archive
from lab.schemas import validate_results
from tests.conftest import ASSETS, require

SHELL = ASSETS / "tasks" / "shell" / "task.yaml"
#: a scripted agent: odd repetitions fix value.txt (met), even ones write 3 (T1 fails)
AGENT = """#!/bin/sh
set -eu
if [ $((LAB_REPETITION % 2)) -eq 1 ]; then echo 2 > value.txt; else echo 3 > value.txt; fi
echo "repetition $LAB_REPETITION wrote $(cat value.txt)"
"""


@pytest.fixture(scope="module", autouse=True)
def _needs(sandbox_ready: None) -> None:
    require("git", shutil.which("git") is not None, "git is not installed")


def lab(*args: str, cwd: Path) -> tuple[int, str]:
    stdout = io.StringIO()
    here = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(stdout):
            code = _cli.main(list(args))
    finally:
        os.chdir(here)
    return code, stdout.getvalue()


def results(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "results.json").read_text())
    validate_results(data)
    return data


def test_a_task_campaign_sharded_and_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = generate_keypair(tmp_path / "keys")
    monkeypatch.setenv("LAB_SIGNING_KEY", str(keys.secret))
    (tmp_path / "agent.sh").write_text(AGENT)
    out = tmp_path / "shards"
    runs = []
    for index in (1, 2):
        code, text = lab(
            "campaign",
            "--task",
            str(SHELL),
            "--agent-cmd",
            "sh agent.sh",
            "--repetitions",
            "3",
            "--require",
            "2",
            "--shard",
            f"{index}/2",
            "--out",
            str(out),
            "--local",
            "--json",
            cwd=tmp_path,
        )
        doc = json.loads(text)
        # a shard exits 0 when each of its own repetitions met the task
        assert code == (0 if index == 1 else 1), doc
        run_dir = Path(doc["archive"]).with_suffix("").with_suffix("")
        runs.append(results(run_dir))
    one, two = runs
    assert one["shard"]["run_id"] == two["shard"]["run_id"]
    frozen = one["shard"]["run_id"]
    assert one["run_id"] == f"{frozen}-shard1of2" and two["run_id"] == f"{frozen}-shard2of2"
    assert [r["index"] for r in one["campaign"]["repetitions"]] == [1, 3]
    assert [r["index"] for r in two["campaign"]["repetitions"]] == [2]
    assert one["campaign"]["evaluation_id"] == two["campaign"]["evaluation_id"]
    assert one["campaign"]["instrument_check"]["key"] == two["campaign"]["instrument_check"]["key"]
    commits = {r["baseline_commit"] for run in runs for r in run["campaign"]["repetitions"]}
    assert len(commits) == 1

    archives = sorted(out.glob(f"{frozen}-shard*of2.tar.gz"))
    assert len(archives) == 2
    code, text = lab(
        "merge",
        *map(str, archives),
        "--pubkey",
        str(keys.public),
        "--out",
        str(tmp_path / "merged"),
        cwd=tmp_path,
    )
    assert code == 0, text  # 2 of 3 met, --require 2
    merged_dir = tmp_path / "merged" / frozen
    merged = results(merged_dir)
    campaign = merged["campaign"]
    assert (campaign["met"], campaign["requested"], campaign["succeeded"]) == (2, 3, True)
    assert [r["outcome"] for r in campaign["repetitions"]] == ["met", "failed", "met"]
    assert campaign["clauses"]["T1"]["met"] == 2 and campaign["clauses"]["T1"]["total"] == 3
    assert campaign["interval"] == list(intervals.interval(2, 3))
    assert len(campaign["evidence"]) == 9
    assert merged["calibration"] == one["calibration"]
    assert [s["index"] for s in merged["shards"]] == [1, 2]
    for i in (1, 2, 3):
        assert (merged_dir / "repetitions" / f"r{i}" / "patch.diff").is_file()
        assert (merged_dir / "repetitions" / f"r{i}" / "final.bundle").is_file()
    assert (merged_dir / "task" / "task.yaml").is_file()
    assert "The nine evidence items" in (merged_dir / "report.md").read_text()
    report = verify_archive(tmp_path / "merged" / f"{frozen}.tar.gz", pubkey=keys.public)
    assert report.authenticity_established
