"""The Markdown report of the sample runs: what a reviewer must find in it."""

from __future__ import annotations

import re
from dataclasses import replace

from lab.model import RunResult
from lab.reports import ArchivedFile
from lab.reports.markdown import render_markdown
from lab.reports.run import EXIT_STATUS_STATEMENT
from lab.reports.text import md_text

FILES = [
    ArchivedFile.of_bytes("results.json", b'{"schema_version": 1}'),
    ArchivedFile.of_bytes("hash-storm/r1/bpftrace/inv2/bpftrace.txt", b"@hash_calls: 256\n"),
]


def _section(md: str, heading: str) -> str:
    start = md.index(heading)
    nxt = md.find("\n## ", start + len(heading))
    return md[start : nxt if nxt != -1 else len(md)]


def test_matrix_and_calibration_score(sample_run: RunResult) -> None:
    md = render_markdown(sample_run, files=FILES)
    cal = sample_run.calibration
    assert cal.total > 0 and cal.not_met == 0
    assert f"{cal.met} of {cal.total} expectations met, 0 not met, 0 not observed" in md
    matrix = _section(md, "## Verdict")
    assert "| scenario | C1 | C2 | C3 | C4 | C5 | C6 | calibration |" in matrix
    rows = [line for line in matrix.splitlines() if line.startswith("| [")]
    assert len(rows) == 8
    egress = next(r for r in rows if "unexpected-egress" in r)
    cells = [c.strip() for c in egress.split("|")[2:8]]
    assert cells[2] == "fail = expected"
    assert all(c == "pass = expected" for i, c in enumerate(cells) if i != 2)


def test_mismatch_is_marked(repeated_run: RunResult) -> None:
    md = render_markdown(repeated_run, files=None)
    row = next(line for line in md.splitlines() if line.startswith("| [baseline #2]"))
    assert "fail - **MISMATCH**, expected pass" in row


def test_verbatim_probe_maps_and_article_figures(sample_run: RunResult) -> None:
    md = render_markdown(sample_run, files=FILES)
    storm = _section(md, "## Scenario hash-storm")
    assert (
        "```\n@connects: 1\n@hash_calls: 256\n@read_bytes: 134233569\n@sent_bytes: 75\n"
        "@switches_out: 4\n```"
    ) in storm
    assert "| source_bytes_read | 134,217,728 | 134,217,728 |" in storm
    transfer = _section(md, "## Scenario interrupted-transfer")
    assert "| payload bytes consumed | 589,824 | 0 |" in transfer


def test_claims_observers_findings_and_limits(sample_run: RunResult) -> None:
    md = render_markdown(sample_run, files=FILES)
    false_success = _section(md, "## Scenario false-success")
    assert "| exit status | 0 | 0 |" in false_success
    assert "| completion event | status ok | status ok |" in false_success
    assert "| backup exists | no | no |" in false_success
    assert "### Calibration findings" in false_success
    assert "| verifier | 2 | backup_exists | no | no | met |" in false_success
    limits = _section(md, "## What this evidence cannot show")
    for phrase in (
        "logical reads",
        "control reached a function",
        "short-lived activity",
        "capture point",
        "restore command",
        "third-party audit",
    ):
        assert phrase in limits
    # once, on the verdict: "read ... below" is never repeated where nothing follows
    assert md.count(md_text(EXIT_STATUS_STATEMENT)) == 1
    assert md_text(EXIT_STATUS_STATEMENT) not in limits


def test_identity_without_hostname_or_host_paths(sample_run: RunResult) -> None:
    md = render_markdown(sample_run, files=FILES)
    identity = _section(md, "## Identity of the run")
    assert sample_run.environment["git_commit"] in identity
    assert sample_run.environment["client_sha256"] in identity
    assert sample_run.signing["key_id"] in identity
    # the signing statement is on the verdict, before the identity
    assert "authenticity - who produced it - is not established" in _section(md, "## Verdict")
    assert "reviewer-secret-hostname" not in md
    assert "/work/" not in md and "/tmp/" not in md


def test_archived_files_table(sample_run: RunResult) -> None:
    md = render_markdown(sample_run, files=FILES)
    files = _section(md, "## Archived files")
    assert f"| results.json | 21 | `{FILES[0].sha256}` |" in files
    assert "| report.md | - | this report (Markdown view): digest in SHA256SUMS |" in files
    assert "SHA256SUMS covers every archived file" in files


def test_single_runs_are_capability_not_reliability(sample_run: RunResult) -> None:
    md = render_markdown(sample_run, files=None)
    assert "never reliability" in _section(md, "## Repetitions")
    assert "reliability 1/1" not in md


def test_repetitions_and_evaluation(repeated_run: RunResult) -> None:
    md = render_markdown(repeated_run, files=None)
    reps = _section(md, "## Repetitions")
    assert "| reliability 2/3; failed repetition(s): 2 |" in reps
    assert "too few for a reliability claim" in reps
    assert "| capability demonstrated |" in reps
    assert "2/3 pass<br>1/3 fail<br>(2/3 as expected: pass)" in reps
    assert "### Per repetition: baseline" in reps
    evaluation = _section(md, "## Candidate evaluation")
    assert repeated_run.evaluation is not None
    assert repeated_run.evaluation.candidate.binary_sha256 is not None
    assert repeated_run.evaluation.candidate.binary_sha256 in evaluation
    assert "| status | fail (clause(s) C2 did not pass in every repetition) |" in evaluation
    assert "| build status | built |" in evaluation
    assert "| instrument check | caught the seeded defects (false-success: C1 fail" in evaluation
    assert (
        "| first backup, wall | 14.1 ms (13.2 ms - 18.8 ms) | 11.7 ms (10.9 ms - 15.1 ms) | 0.83x |"
    ) in evaluation
    # the rounds after the least 12 timed the first backup alone: the row says so
    unchanged = "| unchanged second run, CPU, first 12 rounds | 8.8 ms (8.3 ms - 9.7 ms) |"
    assert unchanged + " not recorded | N/A |" in evaluation
    assert "the 8 rounds after the first 12 timed only the first backup of the baseline" in (
        evaluation
    )
    # every ratio carries its 95 % interval, and the note names how it was computed
    assert "| 0.77x - 0.89x |" in evaluation and "| 0.25x - 0.31x |" in evaluation
    assert "Ratio interval: paired percentile bootstrap over the alternated rounds" in evaluation
    assert "| C2 | " in evaluation and "reliability 4/5" in evaluation
    # diagnostics are kept apart from timings, and a missing collector is not a zero
    assert "| contract | 1 | 2 | not observed | not observed | 1 | 8.3 ms | strace |" in evaluation
    assert "| workspace | .../native |" in evaluation
    assert "refused" not in evaluation


def test_refused_evaluation_says_so_first(repeated_run: RunResult) -> None:
    before = repeated_run.evaluation
    assert before is not None and before.instrument_check is not None
    repeated_run.evaluation = replace(
        before,
        status="refused",
        status_reason="the instrument did not catch the seeded defects on this machine",
        instrument_check=replace(before.instrument_check, ok=False),
    )
    evaluation = _section(render_markdown(repeated_run, files=None), "## Candidate evaluation")
    first = evaluation.split("\n")[2]
    assert first.startswith("> **The lab refused to judge this candidate: the instrument did not")
    assert "did NOT catch the seeded defects" in evaluation


def test_unavailable_observers_are_not_zeros(degraded_run: RunResult) -> None:
    md = render_markdown(degraded_run, files=None)
    assert "strace: strace is not installed (Debian package strace)" in md
    assert "| perf | UNAVAILABLE | kernel.perf_event_paranoid is 4" in md
    assert "Logical source bytes read: not observed" in md
    baseline = _section(md, "## Scenario baseline")
    # no summary tables for observers that never ran, so no invented zero rows
    for key in ("hash_calls", "source_bytes_read", "samples", "dropped_by_kernel"):
        assert f"| {key} |" not in baseline
    assert "| bpftrace | not observed | bpftrace needs CAP_BPF" in baseline
    assert re.search(
        r"\| bpftrace \| 1 \| connects \| 2 \| not observed \| not observed \|", baseline
    )
    assert "| C3 | destination" in baseline and "| not-observed | not observed |" in baseline
    matrix = _section(md, "## Verdict")
    assert "not-observed (expected pass)" in matrix


def test_deterministic(sample_run: RunResult, repeated_run: RunResult) -> None:
    assert render_markdown(sample_run, files=FILES) == render_markdown(sample_run, files=FILES)
    assert render_markdown(repeated_run, files=None) == render_markdown(repeated_run, files=None)


def test_tables_are_well_formed(sample_run: RunResult, repeated_run: RunResult) -> None:
    for run in (sample_run, repeated_run):
        md = render_markdown(run, files=FILES)
        block: list[str] = []
        for line in [*md.splitlines(), ""]:
            if line.startswith("|"):
                block.append(line)
                continue
            if block:
                widths = {len(re.findall(r"(?<!\\)\|", row)) for row in block}
                assert len(widths) == 1, block[0]
                assert set(block[1].replace("|", "").split()) == {"---"}
                block = []


def test_evaluation_result_heads_the_report(repeated_run: RunResult) -> None:
    assert repeated_run.evaluation is not None
    md = render_markdown(repeated_run, files=None)
    head = md.split("## Identity of the run", 1)[0]
    evaluation_id = repeated_run.evaluation.evaluation_id
    assert f"Candidate evaluation {evaluation_id}:" in head
    assert "Passed per clause: C1 " in head
    assert "exit status is 0 only if every contract clause passed" in head
