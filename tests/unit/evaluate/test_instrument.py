"""The instrument check kept and reused (lab.evaluate.instrument): its key changes with every
input it depends on; only a check run in this evaluation that caught both seeded defects is
kept; a kept one is taken back only from an archive that verifies, under the same key, and
says why not otherwise; the record and the reports say where the check came from."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lab import resources
from lab.evaluate import instrument
from lab.evaluate.request import EvaluationRequest
from lab.evidence.archive import write_archive
from lab.evidence.kept import POINTERS, Key
from lab.evidence.provenance import ProvenanceInputs
from lab.evidence.signing import Signer
from lab.model import ObserverStatus
from lab.model.evaluation import InstrumentCheck
from lab.reports.evaluation import (
    EVALUATION_EXIT_STATEMENT,
    evaluation_exit_statement,
    instrument_source,
)
from lab.workloads.backup import scenario

CAUGHT = {"false-success": {"C1": "fail", "C6": "fail"}, "unexpected-egress": {"C3": "fail"}}
SCENARIOS = ("false-success", "unexpected-egress")


def prepared(**change: Any) -> Any:
    """What check_key reads of a run's Setup."""
    facts = {"kernel_release": "6.1.0", "machine": "x86_64", "tool_versions": {"strace": "6.1"}}
    values = {
        "facts": facts,
        "passes": ["none", "strace"],
        "skipped": {},
        "observers": {"strace": ObserverStatus(available=True)},
    }
    return SimpleNamespace(**(values | change))


def calibration() -> list[scenario.Scenario]:
    return scenario.select(resources.scenarios_dir(), list(SCENARIOS), False)


def key(request: EvaluationRequest | None = None, **change: Any) -> Key:
    request = request or EvaluationRequest(kind="binary", path=Path("c"))
    return instrument.check_key(request, prepared(**change), calibration())


def test_the_key_changes_with_every_input() -> None:
    base = key()
    assert key().digest == base.digest and len(base.digest) == 64
    assert {"lab_source", "seeded_client", "scenarios", "passes", "observers", "packets",
            "size", "timeout_s", "sandbox", "machine", "boot_id"} <= set(base.parts)  # fmt: skip
    request = EvaluationRequest(kind="binary", path=Path("c"))
    others = [
        key(passes=["none", "strace", "perf"]),
        key(skipped={"bpftrace": "no BTF"}),
        key(observers={"strace": ObserverStatus(available=False, reason="gone")}),
        key(facts={**prepared().facts, "kernel_release": "6.2.0"}),
        key(facts={**prepared().facts, "tool_versions": {"strace": "6.2"}}),
        key(replace(request, packets="required")),
        key(replace(request, size=1 << 20)),
        key(replace(request, timeout_s=30.0)),
    ]
    digests = {base.digest, *(k.digest for k in others)}
    assert len(digests) == 1 + len(others)
    # the repetitions and the timing rounds do not change what the check catches
    assert key(replace(request, repetitions=7, timing_runs=20)).digest == base.digest


def fresh(k: Key, ok: bool = True) -> InstrumentCheck:
    caught = CAUGHT if ok else {**CAUGHT, "unexpected-egress": {"C3": "pass"}}
    return InstrumentCheck(scenarios=SCENARIOS, caught=caught, ok=ok, key=k.digest, parts=k.parts)


def sealed(out: Path, check: InstrumentCheck, signer: Signer, run_id: str = "eval-1") -> Path:
    """An evaluation's archive holding ``check`` in its results.json (no client runs)."""
    run_dir = out / run_id
    run_dir.mkdir(parents=True)
    results = {
        "$schema": "results.schema.json",
        "schema_version": 1,
        "evaluation": {"instrument_check": check.to_dict()},
        "signing": {"key_id": signer.key_id},
    }
    (run_dir / "results.json").write_text(json.dumps(results))
    (run_dir / "results.schema.json").write_text('{"type": "object"}')
    inputs = ProvenanceInputs(
        run_id=run_id, started_on="2026-12-06T00:00:00Z", finished_on="2026-12-06T00:01:00Z",
        scenarios=list(SCENARIOS),
    )  # fmt: skip
    return write_archive(run_dir, signer=signer, provenance_inputs=inputs, epoch=0).path


def test_a_kept_check_is_taken_back_under_the_same_key(tmp_path: Path) -> None:
    k, signer, said = key(), Signer.ephemeral(), []  # type: list[str]
    check = fresh(k)
    archive = sealed(tmp_path, check, signer)
    assert instrument.keep(tmp_path, check, archive, "eval-1")
    found = instrument.find_kept(tmp_path, k, signer=signer, say=said.append)
    assert found is not None and said == []
    assert (found.caught, found.ok, found.key, found.parts) == (CAUGHT, True, k.digest, k.parts)
    source = found.reused_from
    assert source is not None and source["archive"] == archive.name
    assert source["run_id"] == "eval-1" and len(source["archive_sha256"]) == 64
    assert source["authenticity"] == "integrity only"  # an ephemeral key proves no holder
    assert InstrumentCheck.from_dict(found.to_dict()) == found
    other = key(passes=["none"])
    assert instrument.find_kept(tmp_path, other, signer=signer, say=said.append) is None
    assert said == []  # no pointer under that key: nothing to say


def test_a_kept_check_under_another_key_or_a_changed_archive_is_refused(tmp_path: Path) -> None:
    k, signer, said = key(), Signer.ephemeral(), []  # type: list[str]
    wrong = fresh(key(passes=["none"]))
    archive = sealed(tmp_path, wrong, signer)
    (tmp_path / POINTERS).mkdir()
    instrument.keep(tmp_path, replace(wrong, key=k.digest), archive, "eval-1")  # a bad pointer
    assert instrument.find_kept(tmp_path, k, signer=signer, say=said.append) is None
    assert "under another key" in said[-1] and "runs again" in said[-1]
    instrument.keep(tmp_path, replace(wrong, key=k.digest), archive, "eval-1")
    archive.write_bytes(archive.read_bytes() + b"\0")
    assert instrument.find_kept(tmp_path, k, signer=signer, say=said.append) is None
    assert "changed since its instrument check was kept" in said[-1]


@pytest.mark.parametrize("why", ["failed", "reused", "unkeyed", "unsigned", "no boot"])
def test_only_a_check_run_here_that_caught_both_is_kept(tmp_path: Path, why: str) -> None:
    k = key()
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(b"x")
    check: InstrumentCheck | None = {
        "failed": fresh(k, ok=False),
        "reused": replace(fresh(k), reused_from={"archive": "b.tar.gz"}),
        "unkeyed": replace(fresh(k), key=None),
        "unsigned": fresh(k),
        "no boot": replace(fresh(k), parts={**k.parts, "boot_id": instrument.UNKNOWN_BOOT}),
    }[why]
    assert not instrument.keep(tmp_path, check, None if why == "unsigned" else archive, "a")
    assert not (tmp_path / POINTERS).exists()


def test_the_record_and_the_report_say_where_the_check_came_from() -> None:
    k = key()
    old = InstrumentCheck(scenarios=SCENARIOS, caught=CAUGHT, ok=True)
    assert set(old.to_dict()) == {"scenarios", "caught", "ok"}  # as records before keys
    assert InstrumentCheck.from_dict(old.to_dict()) == old and instrument_source(old) == []
    here = fresh(k)
    assert instrument_source(here) == [("instrument check key", f"checked in this run; {k.digest}")]
    source = {"archive": "eval-1.tar.gz", "archive_sha256": "a" * 64, "run_id": "eval-1",
              "verified": "9 checks passed", "authenticity": "key holder"}  # fmt: skip
    [(label, text)] = instrument_source(replace(here, reused_from=source))
    assert label == "instrument check reused from"
    assert "eval-1.tar.gz" in text and "a" * 64 in text and "not run in this evaluation" in text


def test_the_exit_statement_names_the_seeded_scenarios_only_where_they_ran() -> None:
    here = fresh(key())
    evaluation = SimpleNamespace(instrument_check=here)
    assert evaluation_exit_statement(evaluation) == EVALUATION_EXIT_STATEMENT  # type: ignore[arg-type]
    reused = replace(here, reused_from={"archive": "eval-1.tar.gz"})
    text = evaluation_exit_statement(SimpleNamespace(instrument_check=reused))  # type: ignore[arg-type]
    assert "seeded scenarios in this report" not in text
    assert "No seeded scenario ran in this evaluation" in text and "eval-1.tar.gz" in text


def test_a_pointer_naming_another_run_than_its_archive_holds_is_refused(tmp_path: Path) -> None:
    k, signer, said = key(), Signer.ephemeral(), []  # type: list[str]
    check = fresh(k)
    archive = sealed(tmp_path, check, signer, run_id="eval-1")
    instrument.keep(tmp_path, check, archive, "eval-2")
    assert instrument.find_kept(tmp_path, k, signer=signer, say=said.append) is None
    assert "holds run eval-1, not eval-2" in said[-1]


def test_the_lookup_runs_beside_and_its_sentences_are_said_when_it_is_taken(
    tmp_path: Path,
) -> None:
    signer, said = Signer.ephemeral(), []  # type: list[str]
    request = EvaluationRequest(kind="binary", path=Path("c"))
    setup = prepared(signer=signer)
    k = instrument.check_key(request, setup, calibration())
    check = fresh(k)
    archive = sealed(tmp_path, check, signer)
    instrument.keep(tmp_path, check, archive, "eval-1")
    run_dir = tmp_path / "eval-2"
    lookup = instrument.Lookup(request, setup, tmp_path, calibration())
    found, results = instrument.instrument(
        request, setup, run_dir, calibration(), said.append, lookup
    )
    assert results == [] and found.reused_from is not None and found.key == k.digest
    assert len(said) == 1 and said[0].startswith("Instrument check: caught the seeded defects")
    # a refused pointer is said on the caller's thread, before the check would run again
    archive.write_bytes(archive.read_bytes() + b"\0")
    key_, kept, lines = instrument.Lookup(request, setup, tmp_path, calibration()).take()
    assert key_.digest == k.digest and kept is None
    assert len(lines) == 1 and "changed since its instrument check was kept" in lines[0]
    # --recalibrate looks nothing up: the key alone
    again = replace(request, recalibrate=True)
    assert instrument.Lookup(again, setup, tmp_path, calibration()).take()[1:] == (None, [])


def test_a_lookup_that_failed_raises_when_taken_and_not_when_abandoned(tmp_path: Path) -> None:
    class NoFacts:
        passes, skipped, observers, signer = ["none"], {}, {}, None

        @property
        def facts(self) -> dict[str, Any]:
            raise OSError("the facts could not be read")

    request = EvaluationRequest(kind="binary", path=Path("c"))
    with pytest.raises(OSError, match="facts could not be read"):
        instrument.Lookup(request, NoFacts(), tmp_path, calibration()).take()  # type: ignore[arg-type]
    instrument.Lookup(request, NoFacts(), tmp_path, calibration()).abandon()  # type: ignore[arg-type]
