"""The rows both reports draw (lab.reports.table, run, repetitions, files): capability vs
reliability, calibration sentences, the file table, identity, cells that are never zeros."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.model import Calibration, RunResult
from lab.reports import ArchivedFile
from lab.reports.files import files_table
from lab.reports.repetitions import repetition_wording
from lab.reports.run import calibration_statement, identity_rows, run_name, signing_statement
from lab.reports.table import (
    fmt,
    fmt_ratio,
    fmt_seconds,
    fmt_summary,
    mask_host_path,
    phrase,
    sentence,
)
from tests.unit.reports.reports_sample import build_sample_run


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        (1, 1, "capability demonstrated"),
        (0, 1, "capability not demonstrated"),
        (1, 2, "1/2 repetitions (too few for a reliability claim)"),
        (2, 2, "2/2 repetitions (too few for a reliability claim)"),
        (2, 3, "reliability 2/3"),
        (0, 3, "reliability 0/3"),
        (5, 5, "reliability 5/5"),
    ],
)
def test_repetition_wording(k: int, n: int, expected: str) -> None:
    assert repetition_wording(k, n) == expected


def test_one_run_is_never_called_reliable() -> None:
    assert "reliab" not in repetition_wording(1, 1)
    assert "reliab" not in repetition_wording(0, 1)


def test_calibration_statement() -> None:
    cal = Calibration(met=41, total=44, not_met=1, not_observed=2)
    assert calibration_statement(cal) == ("41 of 44 expectations met, 1 not met, 2 not observed")


def test_missing_values_are_never_zero() -> None:
    assert fmt(None) == "not recorded"
    assert fmt(0) == "0"
    assert fmt_seconds(None) == "not recorded"
    assert fmt_ratio(None) == "N/A"


def test_host_paths_are_masked() -> None:
    assert mask_host_path("/work/main/native/build/backup-client") == ".../backup-client"
    assert mask_host_path("scenarios/baseline.yaml") == "scenarios/baseline.yaml"
    assert fmt(["/tmp/x/y", "ok"]) == ".../y, ok"


def test_identity_hides_the_hostname_and_handles_absent_keys() -> None:
    run = build_sample_run()
    rows = dict(identity_rows(run))
    assert "reviewer-secret-hostname" not in json.dumps(rows)
    assert rows["client binary SHA-256"] == run.environment["client_sha256"]
    assert rows["ephemeral signing key"] == "yes"
    bare = RunResult("r", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", {}, {}, {})
    bare_rows = dict(identity_rows(bare))
    for key in ("git commit", "client binary SHA-256", "kernel", "CPU model", "tool versions"):
        assert bare_rows[key] == "not recorded"
    assert bare_rows["signing key id"] == "not recorded"
    assert rows["signing key id"].startswith(run.signing["key_id"] + " (as minisign -V")
    assert not any("fingerprint" in key for key in rows)


def test_signing_statements() -> None:
    ephemeral = signing_statement({"fingerprint": "x", "ephemeral": True})
    assert ephemeral is not None and "authenticity" in ephemeral
    assert "not established" in ephemeral
    assert signing_statement({"fingerprint": "x", "ephemeral": False}) is None
    assert "not recorded" in (signing_statement({}) or "")


def test_files_table_lists_the_reports_without_their_own_digest() -> None:
    files = [
        ArchivedFile.of_bytes("results.json", b"{}"),
        ArchivedFile.of_bytes("report.md", b"stale"),
        ArchivedFile("a/raw.txt", 3, "ab" * 32),
    ]
    table = files_table(files)
    paths = [row[0] for row in table.rows]
    assert paths == ["a/raw.txt", "results.json", "report.md", "report.pdf", "report.html"]
    report_rows = [row for row in table.rows if row[0].startswith("report.")]
    for row in report_rows:
        assert "this report" in row[2]
        assert len(row[2]) != 64
    assert table.rows[1][2] == ArchivedFile.of_bytes("x", b"{}").sha256
    assert any("SHA256SUMS" in note for note in table.notes)


def test_files_table_without_files_says_so() -> None:
    table = files_table(None)
    assert table.rows == []
    assert "not supplied" in table.notes[0]


def test_sample_asset_matches_the_builder(assets: Path) -> None:
    """The JSON copy other presenters read is what the builder makes (regenerate it with
    ``python tests/unit/reports/reports_sample.py`` when the model changes)."""
    stored = json.loads((assets / "reports" / "sample-results.json").read_text())
    assert stored == json.loads(json.dumps(build_sample_run().to_dict()))


def test_summary_timestamps_are_times_not_counts() -> None:
    assert fmt_summary("first_packet_at", 1_795_968_822.5) == "2026-11-29T16:13:42.500Z"
    assert fmt_summary("packets", 42) == "42"


def test_the_pdf_files_table_folds_each_repetition_directory() -> None:
    files = [
        ArchivedFile.of_bytes("results.json", b"{}"),
        ArchivedFile.of_bytes("baseline/r1/result.json", b"12345"),
        ArchivedFile.of_bytes("baseline/r1/none/inv1/client.stdout", b"123"),
        ArchivedFile.of_bytes("scenarios/baseline.yaml", b"x"),
    ]
    full = files_table(files)
    assert len(full.rows) == 4 + 3  # every file, then the three reports
    grouped = files_table(files, grouped=True)
    paths = [row[0] for row in grouped.rows]
    assert paths[:3] == ["baseline/r1/ (2 files)", "results.json", "scenarios/ (1 file)"]
    assert grouped.rows[0][1] == "8"


def test_a_sentence_ends_in_one_full_stop() -> None:
    assert sentence("Unavailable: packets: not installed (tcpdump).") == (
        "Unavailable: packets: not installed (tcpdump)."
    )
    assert sentence("Collectors used: none") == "Collectors used: none."
    assert phrase("tcpdump is missing (tcpdump). ") == "tcpdump is missing (tcpdump)"
    assert phrase("wait...") == "wait..."


def test_a_run_is_named_once() -> None:
    assert run_name("run-20261201T204817Z-51be30") == "run-20261201T204817Z-51be30"
    assert run_name("campaign-1") == "run campaign-1"
