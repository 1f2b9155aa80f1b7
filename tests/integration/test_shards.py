"""Three shards of the untraced calibration, run as three separate processes with the
default sandbox, merged by ``lab merge``: the merged run verifies with the lab and with the
standard tools, and has the verdicts and aggregates of an unsharded run of the same size."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lab.evidence.keys import generate_keypair
from tests.integration.processes import lab

pytestmark = pytest.mark.integration

REPETITIONS = 3
SHARDS = 3
RUN = ["run", "--all", "--collector", "none", "--packets", "off"]


def verdicts(document: dict[str, Any]) -> list[tuple[str, int, dict[str, str], dict[str, int]]]:
    return [
        (
            s["name"],
            s["repetition"],
            {c: v["observed"] for c, v in s["verdicts"].items()},
            s["calibration"],
        )
        for s in document["scenarios"]
    ]


def aggregates(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The aggregate rows, timings aside (each shard ran on its own clock)."""
    return [
        {k: v for k, v in row.items() if k not in ("wall_s", "cpu_s")}
        for row in document["aggregate"]
    ]


def test_three_shards_merge_into_the_unsharded_run(
    client: Path, sandbox_ready: None, tmp_path: Path
) -> None:
    keys = generate_keypair(tmp_path / "keys")
    env = {**os.environ, "LAB_SIGNING_KEY": str(keys.secret)}
    options = [*RUN, "--repetitions", str(REPETITIONS), "--client", str(client)]

    # three separate processes, one per shard, as three machines would run them
    shard_out = tmp_path / "shards"
    for index in range(1, SHARDS + 1):
        done = lab([*options, "--shard", f"{index}/{SHARDS}", "--out", str(shard_out)], env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    archives = sorted(shard_out.glob("*-shard*of3.tar.gz"))
    assert len(archives) == SHARDS
    frozen = {a.name.rsplit("-shard", 1)[0] for a in archives}
    assert len(frozen) == 1, "every shard derives the same run id from the same inputs"
    run_id = frozen.pop()
    units = []
    for a in archives:
        shard_results = json.loads(
            (a.parent / a.name.removesuffix(".tar.gz") / "results.json").read_text()
        )
        units += [(u["scenario"], u["repetition"]) for u in shard_results["shard"]["units"]]
    assert len(units) == len(set(units)) == 8 * REPETITIONS

    merged_out = tmp_path / "merged"
    done = lab(
        ["merge", *map(str, archives), "--pubkey", str(keys.public), "--out", str(merged_out)], env
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    merged_archive = merged_out / f"{run_id}.tar.gz"
    assert merged_archive.is_file()

    # verified as a reviewer would: with the lab, then with the standard tools
    done = lab(["verify", str(merged_archive), "--pubkey", str(keys.public)], env)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "authenticity established" in done.stdout
    run_dir = merged_out / run_id
    subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=run_dir, check=True)
    if shutil.which("signify-openbsd"):
        subprocess.run(
            ["signify-openbsd", "-V", "-p", str(keys.public), "-m", "SHA256SUMS"],
            cwd=run_dir,
            check=True,
            capture_output=True,
        )

    # the unsharded run of the same size
    whole_out = tmp_path / "whole"
    done = lab([*options, "--out", str(whole_out), "--run-id", "whole"], env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    merged = json.loads((run_dir / "results.json").read_text())
    whole = json.loads((whole_out / "whole" / "results.json").read_text())
    assert verdicts(merged) == verdicts(whole)
    assert aggregates(merged) == aggregates(whole)
    assert merged["calibration"] == whole["calibration"]
    assert merged["options"] == whole["options"]
    assert [s["index"] for s in merged["shards"]] == [1, 2, 3]
    assert all(s["sha256"] and s["archive"].endswith(".tar.gz") for s in merged["shards"])

    # the same shape as the unsharded run, plus the shards' own records
    whole_files = {
        p.relative_to(whole_out / "whole").parts[0] for p in (whole_out / "whole").iterdir()
    }
    merged_files = {p.name for p in run_dir.iterdir()}
    assert whole_files <= merged_files and merged_files - whole_files == {"shards"}
    report = (run_dir / "report.md").read_text()
    assert "## Shards" in report and "## Repetitions" in report
    assert f"reliability {REPETITIONS}/{REPETITIONS}" in report

    # one time base: every shard's rows converted to CLOCK_REALTIME with its own offsets
    # (these three ran on one machine, so the merged order is also the true order)
    rows = [json.loads(r) for r in (run_dir / "timeline.jsonl").read_text().splitlines()]
    header, body = rows[0], rows[1:]
    assert header["event"] == "time-base" and header["time_base"] == "CLOCK_REALTIME"
    assert [b["shard"] for b in header["shards"]] == [1, 2, 3]
    assert all(b["converted"] and b["uncertainty_ns"] >= 0 for b in header["shards"])
    assert header["across_shards_uncertainty_ns"] is None and "unconverted_rows" not in header
    assert [r["t_ns"] for r in body] == sorted(r["t_ns"] for r in body)
    assert {r["shard"] for r in body} == {1, 2, 3}
    for index in (1, 2, 3):
        own = [
            json.loads(line)
            for line in (run_dir / "shards" / str(index) / "timeline.jsonl")
            .read_text()
            .splitlines()[1:]
        ]
        mine = [r for r in body if r["shard"] == index]
        assert len(mine) == len(own)
        # the shard's own order is kept, and each row converts back to its own time
        assert sorted(r["shard_t_ns"] for r in mine) == [r["shard_t_ns"] for r in mine]
        assert all(r["t_ns"] == r["shard_t_ns"] + r["shard_offset_ns"] for r in mine)
    assert merged["environment"]["time_base"]["time_base"] == "CLOCK_REALTIME"
