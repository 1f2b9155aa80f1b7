"""The user's commands, for real, in the lab image: ``invoke lab.run`` and
``invoke lab.evaluate``, then the archives verified by our verifier and by the standard
tools. Needs Docker and root (the image is built by the nox ``e2e`` session first)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, require

ARTIFACTS = ROOT / "artifacts"


def invoke(*args: str, timeout: float = 3000) -> subprocess.CompletedProcess[str]:
    require("docker", shutil.which("docker") is not None, "docker is not installed")
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def newest(prefix: str, before: set[Path]) -> Path:
    made = sorted(p for p in ARTIFACTS.glob(f"{prefix}-*.tar.gz") if p not in before)
    assert made, f"no new {prefix} archive in {ARTIFACTS}"
    return made[-1]


def verify_everywhere(archive: Path, tmp_path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "lab", "verify", str(archive)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "integrity verified" in done.stdout
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    run_dir = tmp_path / archive.name.removesuffix(".tar.gz")
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=run_dir, check=True)
    subprocess.run(
        ["signify-openbsd", "-V", "-p", "lab.pub", "-m", "SHA256SUMS"],
        cwd=run_dir,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["minisign", "-V", "-p", "lab.pub", "-m", "SHA256SUMS", "-x", "SHA256SUMS.sig"],
        cwd=run_dir,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["sha256sum", "--quiet", "-c", archive.name + ".sha256"], cwd=archive.parent, check=True
    )
    data: dict[str, Any] = json.loads((run_dir / "results.json").read_text())
    return data


def test_invoke_lab_run_in_the_image(tmp_path: Path) -> None:
    before = set(ARTIFACTS.glob("*.tar.gz"))
    done = invoke("lab.run", "--repetitions", "3")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for name in ("baseline", "hash-storm", "unexpected-egress"):
        assert f"{name}: observations matched the expectations in 3 of 3" in done.stdout
    archive = newest("run", before)
    assert archive.name in done.stdout and "sha256sum -c" in done.stdout
    results = verify_everywhere(archive, tmp_path)
    assert results["environment"]["in_container"] is True
    assert results["environment"]["image"]["client_sha256"]
    assert results["calibration"]["not_met"] == 0
    assert results["calibration"]["not_observed"] == 0  # every collector ran in the image
    storm = next(s for s in results["scenarios"] if s["name"] == "hash-storm")
    assert storm["invocations"][1]["observed"]["bpftrace"]["hash_calls"] == 256
    assert storm["invocations"][1]["observed"]["strace"]["source_bytes_read"] == 134_217_728
    assert archive.stat().st_uid == ROOT.stat().st_uid  # belongs to the invoking user


def test_invoke_lab_evaluate_builds_in_the_image(tmp_path: Path) -> None:
    before = set(ARTIFACTS.glob("*.tar.gz"))
    patch = ROOT / "tests" / "assets" / "candidates" / "optimistic-on-drop.patch"
    done = invoke("lab.evaluate", "--patch", str(patch), "--repetitions", "3", "--timing-runs", "5")
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    archive = newest("eval", before)
    results = verify_everywhere(archive, tmp_path)
    evaluation = results["evaluation"]
    assert results["environment"]["in_container"] is True
    assert evaluation["candidate"]["build"]["status"] == "built"
    assert len(evaluation["candidate"]["binary_sha256"]) == 64
    assert evaluation["clauses"]["C4"]["fail"] >= 1 and evaluation["clauses"]["C6"]["fail"] >= 1
    conditions = len(list((ROOT / "scenarios" / "candidate").glob("*.yaml")))
    assert all(row["total"] == conditions * 3 for row in evaluation["clauses"].values())
    assert evaluation["timing"]["ratio"]["first_backup_wall"] is not None
    # the instrument floor's reference uploader is in the image and was timed beside them
    assert evaluation["timing"]["floor"]["reason"] is None, evaluation["timing"]["floor"]
    assert evaluation["timing"]["clients"]["floor"]["nonzero_exits"] == 0
    run_dir = tmp_path / archive.name.removesuffix(".tar.gz")
    assert (run_dir / "candidate" / "candidate.patch").read_bytes() == patch.read_bytes()
    report = (run_dir / "report.md").read_text()
    assert (
        evaluation["evaluation_id"] in report and evaluation["candidate"]["binary_sha256"] in report
    )


def test_invoke_lab_run_default_archive_reads_in_ten_minutes(tmp_path: Path) -> None:
    """Issue 24's reviewer path: the default ``invoke lab.run`` in the image leaves a PDF of
    at most 12 pages (page 1 the verdict), a report.html listed in SHA256SUMS and a timeline
    whose every row is on the one time base, sorted."""
    from tests.integration.test_full_run import _pdf_pages

    before = set(ARTIFACTS.glob("*.tar.gz"))
    done = invoke("lab.run")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    archive = newest("run", before)
    results = verify_everywhere(archive, tmp_path)
    assert results["environment"]["in_container"] is True
    run_dir = tmp_path / archive.name.removesuffix(".tar.gz")
    pages = _pdf_pages(run_dir / "report.pdf")
    assert len(pages) <= 12, f"the default run's PDF has {len(pages)} pages"
    assert "Calibration score: 170 of 170" in pages[0], pages[0][:2000]
    sums = (run_dir / "SHA256SUMS").read_text()
    # BSD style "SHA256 (report.html) = …" or GNU style "… report.html"
    assert re.search(r"(^|[ (*])report\.html(\)| |$)", sums, re.M), sums[:2000]
    # the archived report.html in a real browser: the matrix and every scenario, no link
    # pointing nowhere inside the unpacked archive
    from tests.unit.reports.test_reports_html import _browser, broken_links

    dom = _browser(tmp_path, "--dump-dom", (run_dir / "report.html").as_uri()).stdout
    assert 'id="verdict-matrix"' in dom
    for scenario in results["scenarios"]:
        assert f'id="scenario-{scenario["name"]}"' in dom
    assert broken_links(dom, run_dir) == []
    rows = [json.loads(line) for line in (run_dir / "timeline.jsonl").read_text().splitlines()]
    assert rows[0]["event"] == "time-base" and rows[0]["time_base"] == "CLOCK_MONOTONIC"
    times = [row["t_ns"] for row in rows]  # every row has one, on that base
    assert times == sorted(times)
    # the image of a real build: its content digest (the layers' ChainID) and its local ID
    # are two fields with two values, and its base is one record (snapshot or pulled digest)
    image = results["environment"]["image"]
    assert image["content_digest"].startswith("sha256:") and image["id"].startswith("sha256:")
    assert image["content_digest"] != image["id"], image
    base = image["base"]
    assert ("snapshot" in base) != ("digest" in base), base
