"""A small candidate evaluation run as two shards in two separate processes (``lab evaluate
--shard 1/2`` and ``2/2``, on this host with the sandbox), merged by ``lab merge``: the merged
archive verifies, and its evaluation has the unsharded evaluation's status, clause counts
k/N and per-repetition verdicts (timings aside)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from lab.collectors.strace import StraceCollector
from lab.evidence.keys import generate_keypair
from tests.conftest import require
from tests.integration.processes import lab

pytestmark = pytest.mark.integration

SHARDS = 2
#: 4 conditions × 2 repetitions = 8 units, 4 per shard; small and cheap, C4 still exercised
#: (the receiver drops the first transfer after 64 KiB)
EVALUATE = [
    "evaluate", "--local", "--repetitions", "2", "--timing-runs", "2", "--collector", "strace",
    "--packets", "off", "--size", "128K",
]  # fmt: skip


def verdicts(document: dict[str, Any]) -> list[tuple[str, int, dict[str, str]]]:
    return [
        (s["name"], s["repetition"], {c: v["observed"] for c, v in s["verdicts"].items()})
        for s in document["scenarios"]
    ]


def aggregates(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in row.items() if k not in ("wall_s", "cpu_s")}
        for row in document["aggregate"]
    ]


def test_two_evaluation_shards_merge_into_the_unsharded_evaluation(
    client: Path, sandbox_ready: None, tmp_path: Path
) -> None:
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)
    keys = generate_keypair(tmp_path / "keys")
    env = {**os.environ, "LAB_SIGNING_KEY": str(keys.secret)}
    candidate = ["--binary", str(client)]

    shard_out = tmp_path / "shards"
    for index in range(1, SHARDS + 1):
        done = lab(
            [*EVALUATE, *candidate, "--shard", f"{index}/{SHARDS}", "--out", str(shard_out)], env
        )
        # a shard's exit status is its own units' judgement; the merge decides the whole
        assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    archives = sorted(shard_out.glob(f"eval-*-shard*of{SHARDS}.tar.gz"))
    assert len(archives) == SHARDS
    frozen = {a.name.rsplit("-shard", 1)[0] for a in archives}
    assert len(frozen) == 1, "every shard derives the same run id from the same inputs"
    run_id = frozen.pop()
    shard_docs = [
        json.loads((a.parent / a.name.removesuffix(".tar.gz") / "results.json").read_text())
        for a in archives
    ]
    assert [("timing" in d["evaluation"]) for d in shard_docs] == [True, False]
    assert all(d["evaluation"]["instrument_check"]["ok"] for d in shard_docs)
    assert len({d["evaluation"]["evaluation_id"] for d in shard_docs}) == 1

    merged_out = tmp_path / "merged"
    done_merge = lab(
        ["merge", *map(str, archives), "--pubkey", str(keys.public), "--out", str(merged_out)], env
    )
    whole_out = tmp_path / "whole"
    whole_done = lab([*EVALUATE, *candidate, "--run-id", "whole", "--out", str(whole_out)], env)
    assert whole_done.returncode in (0, 1), whole_done.stdout[-3000:] + whole_done.stderr[-3000:]
    # the merge exits as the unsharded evaluation does (0 only when it passed)
    assert done_merge.returncode == whole_done.returncode, (
        done_merge.stdout[-3000:] + done_merge.stderr[-3000:]
    )
    merged_archive = merged_out / f"{run_id}.tar.gz"
    done = lab(["verify", str(merged_archive), "--pubkey", str(keys.public)], env)
    assert done.returncode == 0 and "authenticity established" in done.stdout, done.stdout[-3000:]

    merged = json.loads((merged_out / run_id / "results.json").read_text())
    whole = json.loads((whole_out / "whole" / "results.json").read_text())
    m, w = merged["evaluation"], whole["evaluation"]
    assert m["evaluation_id"] == w["evaluation_id"]
    assert m["candidate"]["input_sha256"] == w["candidate"]["input_sha256"]
    assert (m["status"], m.get("status_reason")) == (w["status"], w.get("status_reason"))
    assert m["clauses"] == w["clauses"]
    assert m["status"] == "pass" and done_merge.returncode == 0  # the seeded client is correct
    assert m["instrument_check"] == w["instrument_check"]
    assert m["client_contract"] == w["client_contract"]
    assert m["timing"]["rounds"] == w["timing"]["rounds"] == 2  # shard 1's rounds
    assert verdicts(merged) == verdicts(whole)
    assert aggregates(merged) == aggregates(whole)
    assert merged["options"] == whole["options"]
    assert [s["index"] for s in merged["shards"]] == [1, 2]

    # the shape of the unsharded evaluation, plus the shards' own records
    whole_files = {p.name for p in (whole_out / "whole").iterdir()}
    merged_files = {p.name for p in (merged_out / run_id).iterdir()}
    assert merged_files - whole_files == {"shards"} and whole_files <= merged_files
    report = (merged_out / run_id / "report.md").read_text()
    assert "## Shards" in report and "## Candidate evaluation" in report
