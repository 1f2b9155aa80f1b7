"""An agent campaign of two repetitions run as two shards in two separate processes (``lab
campaign --shard 1/2`` and ``2/2``, on this host with the sandbox), merged by ``lab merge``:
the merged archive verifies and holds both agent runs with the outcomes an unsharded
campaign gives them (tests/integration/test_campaign.py: ``speedup.sh`` meets the task,
``nothing.sh`` is no-change), k of N over both, each run's directory where it belongs.

Small settings (tests/assets/campaigns/quick-speedup.yaml): one evaluation repetition, two
timing rounds, strace only, a 64 KiB source; each shard checks the instrument and the
baseline on its own, so this costs about two short campaigns."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lab.collectors.strace import StraceCollector
from lab.evidence.keys import generate_keypair
from tests.conftest import ASSETS, ROOT, require
from tests.integration.processes import lab

pytestmark = pytest.mark.integration

AGENTS = ASSETS / "agents"
TASK = ASSETS / "campaigns" / "quick-speedup.yaml"


def test_two_campaign_shards_merge_into_one_campaign(
    client: Path, sandbox_ready: None, tmp_path: Path
) -> None:
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)
    for tool in ("git", "patch", "make"):
        require(tool, shutil.which(tool) is not None, f"{tool} is not installed")
    keys = generate_keypair(tmp_path / "keys")
    # the agents' directory is the working directory (the command names files there), so
    # the lab is found through PYTHONPATH, as in the image
    env = {**os.environ, "LAB_SIGNING_KEY": str(keys.secret), "PYTHONPATH": str(ROOT)}
    agent = f"sh by-repetition.sh {ROOT} speedup.sh nothing.sh"
    campaign = ["campaign", "--task", str(TASK), "--agent-cmd", agent, "--local",
                "--repetitions", "2", "--require", "1", "--budget", "30"]  # fmt: skip

    shard_out = tmp_path / "shards"
    codes = []
    for index in (1, 2):
        done = lab([*campaign, "--shard", f"{index}/2", "--out", str(shard_out)], env, AGENTS)
        assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
        codes.append(done.returncode)
    assert codes == [0, 1]  # each shard by its own runs: r1 met, r2 no-change
    archives = sorted(shard_out.glob("campaign-*-shard*of2.tar.gz"))
    assert len(archives) == 2
    run_id = archives[0].name.rsplit("-shard", 1)[0]
    assert archives[1].name.startswith(run_id)

    merged_out = tmp_path / "merged"
    done = lab(
        ["merge", *map(str, archives), "--pubkey", str(keys.public), "--out", str(merged_out)],
        env,
        ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]  # 1 met, --require 1
    done = lab(["verify", str(merged_out / f"{run_id}.tar.gz"), "--pubkey", str(keys.public)],
               env, ROOT)  # fmt: skip
    assert done.returncode == 0 and "authenticity established" in done.stdout, done.stdout[-3000:]

    run_dir = merged_out / run_id
    merged = json.loads((run_dir / "results.json").read_text())["campaign"]
    assert [(r["index"], r["outcome"]) for r in merged["repetitions"]] == [
        (1, "met"),
        (2, "no-change"),
    ]
    assert (merged["requested"], merged["met"], merged["succeeded"]) == (2, 1, True)
    assert merged["baseline"]["status"] == "pass" and merged["instrument_check"]["ok"] is True
    for index in (1, 2):
        assert (run_dir / "repetitions" / f"r{index}" / "repetition.json").is_file()
    assert (run_dir / "repetitions" / "r1" / "final.bundle").is_file()
    assert {"campaign", "baseline", "evaluation.json", "shards"} <= {
        p.name for p in run_dir.iterdir()
    }
    report = (run_dir / "report.md").read_text()
    assert "## Shards" in report and "agent runs" in report
