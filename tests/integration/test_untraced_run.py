"""All eight scenarios end to end, untraced: every figure of the seed article that the
receiver, decoy and verifier can establish, read back from results.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lab.pipeline import RunRequest, execute


@pytest.fixture(scope="module")
def results(client: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("artifacts")
    outcome = execute(
        # --jobs 1: the sequential path end to end (tests/integration/test_jobs.py: --jobs 2)
        RunRequest(
            everything=True,
            collector="none",
            packets="off",
            out=out,
            client=client,
            archive=False,
            jobs=1,
        ),
        say=lambda _m: None,
    )
    assert outcome.result.calibrated, outcome.result.calibration
    data: dict[str, Any] = json.loads((outcome.run_dir / "results.json").read_text())
    assert (outcome.run_dir / "timeline.jsonl").stat().st_size > 0
    assert (outcome.run_dir / "report.md").exists()
    for s in data["scenarios"]:
        assert (outcome.run_dir / s["name"] / "r1" / "result.json").exists()
    return data


def scenario(results: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in results["scenarios"] if s["name"] == name)


def rx(results: dict[str, Any], name: str, key: str) -> list[Any]:
    return [i["receiver"][key] for i in scenario(results, name)["invocations"]]


def verdicts(results: dict[str, Any], name: str) -> dict[str, str]:
    return {c: v["observed"] for c, v in scenario(results, name)["verdicts"].items()}


def test_baseline(results: dict[str, Any]) -> None:
    assert rx(results, "baseline", "payload_bytes_consumed") == [524_288, 0]
    assert rx(results, "baseline", "connections") == [2, 1]
    v = verdicts(results, "baseline")
    assert all(v[c] == "pass" for c in ("C1", "C2", "C6"))
    # no drop and no mismatching payload was injected: those clauses were not exercised
    assert v["C4"] == v["C5"] == "not-exercised"
    assert v["C3"] == "not-observed"  # untraced: only the decoy watched, so no pass claimed


def test_unexpected_egress(results: dict[str, Any]) -> None:
    s = scenario(results, "unexpected-egress")
    assert rx(results, "unexpected-egress", "connections") == [2, 1]
    assert [i["decoy"]["connections"] for i in s["invocations"]] == [1, 1]
    assert s["verdicts"]["C3"]["observed"] == "fail"
    decoy = s["passes"][0]["decoy_address"]
    assert decoy in s["verdicts"]["C3"]["reason"]


def test_false_success(results: dict[str, Any]) -> None:
    s = scenario(results, "false-success")
    assert [i["exit_status"] for i in s["invocations"]] == [0, 0]
    assert s["backup"]["exists"] is False
    assert rx(results, "false-success", "connections") == [0, 0]
    v = verdicts(results, "false-success")
    assert v["C1"] == "fail" and v["C6"] == "fail"


def test_interrupted_transfer(results: dict[str, Any]) -> None:
    assert rx(results, "interrupted-transfer", "payload_bytes_consumed") == [589_824, 0]
    assert rx(results, "interrupted-transfer", "decisions")[0] == ["dropped-by-fault", "committed"]
    assert verdicts(results, "interrupted-transfer")["C4"] == "pass"


def test_corrupt_payload(results: dict[str, Any]) -> None:
    s = scenario(results, "corrupt-payload")
    preload = s["passes"][0]["preload_sha256"]
    assert [i["verifier"]["backup_sha256"] for i in s["invocations"]] == [preload, preload]
    assert rx(results, "corrupt-payload", "decisions") == [["digest-mismatch"]] * 2
    v = verdicts(results, "corrupt-payload")
    assert v["C5"] == "pass" and v["C1"] == "fail"


def test_redundant_upload(results: dict[str, Any]) -> None:
    assert rx(results, "redundant-upload", "payload_bytes_consumed") == [524_288, 524_288]
    assert verdicts(results, "redundant-upload")["C2"] == "fail"


def test_observers_absent_not_zero(results: dict[str, Any]) -> None:
    for s in results["scenarios"]:
        for i in s["invocations"]:
            assert i["observed"] == {}
            assert set(i["missing"]) >= {"strace", "bpftrace", "perf", "packets"}
