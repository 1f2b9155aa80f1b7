"""Each judged verification of a campaign as an in-toto Test Result statement
(``https://in-toto.io/attestation/test-result/v0.1``), in a DSSE envelope signed like the
provenance, one line each in ``test-results.intoto.jsonl`` beside it.

    lines = write_test_results(run_dir, record, signer)       # before the archive is packed
    statement = open_envelope(json.loads(line), public_key, what="test result")

The subject is what was tested: a repetition's ``native.patch`` (its final result) or a
trajectory snapshot's; the configuration is the frozen evaluation (``evaluation.json``) and
the task file (``campaign/task.yaml``). ``passedTests`` / ``failedTests`` are the task's
clauses; a candidate that did not build is FAILED with the failed test ``build``. The file
is a subject of SHA256SUMS like every other, so ``lab verify`` covers it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.evidence.provenance import STATEMENT_TYPE, envelope_line, sign_envelope
from lab.evidence.signing import Signer
from lab.host.digest import sha256_file
from lab.model.campaign import CampaignRecord

PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
TEST_RESULTS = "test-results.intoto.jsonl"
CONFIGURATION = ("evaluation.json", "campaign/task.yaml")


def statement(run_dir: Path, subject: str, passed: list[str], failed: list[str]) -> dict[str, Any]:
    """One Test Result statement for the file ``subject`` (relative to ``run_dir``)."""
    configuration = [
        {"name": name, "digest": {"sha256": sha256_file(run_dir / name)}}
        for name in CONFIGURATION
        if (run_dir / name).is_file()
    ]
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject, "digest": {"sha256": sha256_file(run_dir / subject)}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "result": "FAILED" if failed else "PASSED",
            "configuration": configuration,
            "passedTests": sorted(passed),
            "warnedTests": [],
            "failedTests": sorted(failed),
        },
    }


def _judged(record: CampaignRecord) -> list[tuple[str, list[str], list[str]]]:
    """(subject, passed, failed) for every judged verification, in order."""
    clauses = list(record.task.get("clauses", []))
    found = []
    for rep in record.repetitions:
        base = f"repetitions/r{rep.index}"
        if rep.evaluation is not None and rep.evaluation.clauses is not None:
            failed = [c for c in clauses if c in rep.failed_clauses]
            passed = [c for c in clauses if c not in rep.failed_clauses]
            found.append((f"{base}/native.patch", passed, failed))
        elif rep.outcome == "build-failed":
            found.append((f"{base}/native.patch", [], ["build"]))
        for shot in () if rep.trajectory is None else rep.trajectory.judged:
            patch = f"{base}/trajectory/s{shot.index}/native.patch"
            if shot.status == "build-failed":
                found.append((patch, [], ["build"]))
            elif shot.status == "judged":
                failed = [c for c, v in shot.clauses.items() if v != "pass"]
                passed = [c for c, v in shot.clauses.items() if v == "pass"]
                found.append((patch, passed, failed))
    return found


def write_test_results(run_dir: Path, record: CampaignRecord, signer: Signer | None) -> int:
    """Write every judged verification's signed statement; how many (0 without a signer,
    or when nothing was judged: then no file)."""
    if signer is None:
        return 0
    lines = [
        envelope_line(sign_envelope(statement(run_dir, subject, passed, failed), signer))
        for subject, passed, failed in _judged(record)
        if (run_dir / subject).is_file()
    ]
    if lines:
        (run_dir / TEST_RESULTS).write_text("".join(line.rstrip("\n") + "\n" for line in lines))
    return len(lines)
