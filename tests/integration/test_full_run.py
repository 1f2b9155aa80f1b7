"""Every scenario under every collector, with packets required and a signed archive: the
calibration matrix figures of the seed article, and the archive checked by our verifier
and by the standard tools (then tampered with)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from lab.evidence.verify import inspect_archive
from lab.host.doctor import check
from lab.model import CLAUSES, PROCESS_COLLECTORS, RunResult
from lab.pipeline import RunOutcome, RunRequest, execute
from tests.conftest import require


@pytest.fixture(scope="module")
def outcome(client: Path, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    observers = check(mount=True).observers
    for name in (*PROCESS_COLLECTORS, "packets"):
        require(name, observers[name].available, observers[name].reason)
    out = tmp_path_factory.mktemp("full")
    os.environ.pop("LAB_SIGNING_KEY", None)
    return execute(
        RunRequest(
            everything=True,
            collector="all",
            packets="required",
            out=out,
            client=client,
            archive=True,
        ),
        say=lambda _m: None,
    )


def inv(run: RunResult, name: str, index: int) -> dict[str, Any]:
    s = next(s for s in run.scenarios if s.name == name)
    return s.merged_invocations()[index - 1]


def test_fully_calibrated(outcome: RunOutcome) -> None:
    cal = outcome.result.calibration
    assert outcome.result.calibrated
    assert cal.not_met == 0 and cal.not_observed == 0, cal
    expected_failures = {
        "false-success": {"C1", "C6"},
        "unexpected-egress": {"C3"},
        "corrupt-payload": {"C1"},
        "redundant-upload": {"C2"},
    }
    for s in outcome.result.scenarios:
        failed = {c for c in CLAUSES if s.verdicts[c].observed == "fail"}
        assert failed == expected_failures.get(s.name, set()), (s.name, failed)


def test_seed_article_figures(outcome: RunOutcome) -> None:
    run = outcome.result
    storm2 = inv(run, "hash-storm", 2)["observed"]
    assert storm2["strace"]["source_bytes_read"] == 134_217_728
    assert storm2["bpftrace"]["hash_calls"] == 256
    assert storm2["bpftrace"]["connects"] == 1
    assert storm2["bpftrace"]["maps"]["@hash_calls"] == "256"
    assert inv(run, "hash-storm", 1)["observed"]["bpftrace"]["hash_calls"] == 256
    for name, connects in (("baseline", (2, 1)), ("unexpected-egress", (3, 2))):
        for i, n in enumerate(connects, 1):
            assert inv(run, name, i)["observed"]["strace"]["connects"] == n
            assert inv(run, name, i)["observed"]["bpftrace"]["connects"] == n
    egress = next(s for s in run.scenarios if s.name == "unexpected-egress")
    decoy = egress.primary.decoy_address if egress.primary else ""
    assert decoy in egress.verdicts["C3"].reason
    for i in (1, 2):
        false = inv(run, "false-success", i)["observed"]
        assert false["strace"]["connects"] == 0 and false["bpftrace"]["connects"] == 0
        assert false["packets"]["packets"] == 0
        assert inv(run, "busy-spin", i)["observed"]["perf"]["top_client_symbol"] == "busy_wait"
    for s in run.scenarios:
        for row in s.merged_invocations():
            assert row["observed"]["packets"]["dropped_by_kernel"] == 0
    assert inv(run, "interrupted-transfer", 1)["receiver"]["payload_bytes_consumed"] == 589_824


def test_archive_verifies_with_our_tool_and_standard_tools(
    outcome: RunOutcome, tmp_path: Path
) -> None:
    info = outcome.archive
    assert info is not None and info.path.exists()
    report = inspect_archive(info.path)
    assert report.ok and not report.authenticity_established  # ephemeral key: said plainly
    with tarfile.open(info.path) as tar:
        tar.extractall(tmp_path, filter="data")
    run_dir = tmp_path / info.run_dir.name
    assert (run_dir / "report.pdf").stat().st_size > 10_000
    require("sha256sum", shutil.which("sha256sum") is not None, "coreutils sha256sum missing")
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=run_dir, check=True)
    signify = shutil.which("signify-openbsd")
    require("signify", signify is not None, "signify-openbsd is not installed")
    subprocess.run(
        ["signify-openbsd", "-V", "-p", "lab.pub", "-m", "SHA256SUMS"], cwd=run_dir, check=True
    )
    minisign = shutil.which("minisign")
    require("minisign", minisign is not None, "minisign is not installed")
    subprocess.run(
        ["minisign", "-V", "-p", "lab.pub", "-m", "SHA256SUMS", "-x", "SHA256SUMS.sig"],
        cwd=run_dir,
        check=True,
        capture_output=True,
    )
    # one flipped byte in a member: the standard tools and ours refuse
    results = run_dir / "results.json"
    data = bytearray(results.read_bytes())
    data[100] ^= 0x01
    results.write_bytes(bytes(data))
    bad = subprocess.run(
        ["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=run_dir, capture_output=True
    )
    assert bad.returncode != 0 and b"results.json: FAILED" in bad.stdout
    blob = bytearray(info.path.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    tampered = tmp_path / "tampered.tar.gz"
    tampered.write_bytes(bytes(blob))
    assert not inspect_archive(tampered).ok


#: the default run's PDF (``invoke lab.run``: every scenario, every collector, packets
#: required, one repetition, the run this module makes) is read in ten minutes: at most
#: this many pages, page 1 the verdict
PDF_PAGE_BUDGET = 12


def _poppler(name: str) -> str:
    path = shutil.which(name)
    require("pdftoppm", path is not None, f"{name} not installed (Debian package poppler-utils)")
    assert path is not None
    return path


def _pdf_pages(pdf: Path) -> list[str]:
    info = subprocess.run(
        [_poppler("pdfinfo"), str(pdf)], capture_output=True, text=True, check=True
    ).stdout
    count = int(next(line.split()[1] for line in info.splitlines() if line.startswith("Pages:")))
    return [
        subprocess.run(
            [_poppler("pdftotext"), "-f", str(p), "-l", str(p), str(pdf), "-"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for p in range(1, count + 1)
    ]


def test_the_default_runs_pdf_is_a_ten_minute_read(outcome: RunOutcome) -> None:
    pages = _pdf_pages(outcome.run_dir / "report.pdf")
    assert len(pages) <= PDF_PAGE_BUDGET, f"{len(pages)} pages"
    first = " ".join(pages[0].split())
    assert "Verdict" in first and "Calibration score: 170 of 170" in first
    assert all(s.name in first for s in outcome.result.scenarios)
    assert "Scenario baseline" not in first  # page 1 is the verdict alone
    text = " ".join(" ".join(p.split()) for p in pages)
    for s in outcome.result.scenarios:
        assert f"Scenario {s.name}" in text
    # the clauses that matter keep their reasons: the decoy's address in egress's C3, the
    # interruption in interrupted-transfer's C4
    egress = next(s for s in outcome.result.scenarios if s.name == "unexpected-egress")
    assert egress.verdicts["C3"].reason.split(";")[0][:60] in text
    assert egress.primary is not None and egress.primary.decoy_address in text
    # the CPU charts drawn are those of the scenarios whose expectations concern CPU
    assert "CPU samples by symbol: busy-spin" in text
    assert "CPU samples by symbol: hash-storm" in text
    assert "CPU samples by symbol: baseline" not in text
