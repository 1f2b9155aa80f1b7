"""lab.pipeline without running a pass: choosing passes, refusing bad set-ups before
anything is written, validating results.json, listing the archived files."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from lab.errors import ClientError, CollectorError, ScenarioError, SchemaError, UsageError
from lab.host import doctor, identity
from lab.model import ObserverStatus, RunResult
from lab.pipeline import RunRequest, archived_files, setup, write_results
from lab.pipeline import run as orchestrate
from lab.pipeline.prepare import plan_passes
from tests.conftest import ROOT
from tests.unit.reports.reports_sample import build_sample_run

UP = ObserverStatus(True)


def down(reason: str) -> ObserverStatus:
    return ObserverStatus(False, reason)


def observers(**overrides: ObserverStatus) -> dict[str, ObserverStatus]:
    return {"strace": UP, "bpftrace": UP, "perf": UP, "packets": UP, **overrides}


# --- plan_passes ------------------------------------------------------------------------------
def test_all_runs_every_available_collector_after_the_untraced_pass() -> None:
    passes, skipped = plan_passes("all", observers(perf=down("paranoid is 4")))
    assert passes == ["none", "strace", "bpftrace"]
    assert skipped == {"perf": "unavailable: paranoid is 4"}


def test_one_collector_and_why_the_others_do_not_run() -> None:
    passes, skipped = plan_passes("bpftrace", {"bpftrace": UP})
    assert passes == ["none", "bpftrace"]
    assert skipped == {
        "strace": "not selected (--collector bpftrace)",
        "perf": "not selected (--collector bpftrace)",
    }
    passes, skipped = plan_passes("strace", {})
    assert passes == ["none"] and skipped["strace"] == "unavailable: not probed"
    assert plan_passes("none", observers())[0] == ["none"]


def test_an_unknown_collector_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--collector 'dtrace' is unknown; one of none"):
        plan_passes("dtrace", observers())


#: what the replaced doctor.check was last asked to probe
ASKED: dict[str, list[str] | None] = {}


# --- setup ------------------------------------------------------------------------------------
@pytest.fixture
def probed(monkeypatch: pytest.MonkeyPatch) -> dict[str, ObserverStatus]:
    """doctor.check replaced: the observers are whatever the test puts in this dict."""
    found = observers()
    asked: dict[str, list[str] | None] = {}

    def check(
        mount: bool = True,
        collectors: list[str] | None = None,
        sandbox: bool = False,
        facts: bool = True,
        reuse: bool = False,
    ) -> doctor.Doctor:
        asked["collectors"] = collectors
        asked["facts"] = [facts]
        asked["reuse"] = [reuse]
        return doctor.Doctor(
            dict(found), {"kernel_release": "6.1"} if facts else {}, ["mounted tracefs"]
        )

    monkeypatch.setattr(doctor, "check", check)
    # a run gathers the machine's facts on a thread of its own, beside the first passes
    monkeypatch.setattr(doctor, "gather_facts", lambda: {"kernel_release": "6.1"})
    # and the lab source's git state with them (two git commands, off the run's end)
    monkeypatch.setattr(identity, "source_state", lambda repo: dict(SOURCE, repo=str(repo)))
    monkeypatch.setattr(sys.modules[__name__], "ASKED", asked)
    return found


SOURCE = {"git_commit": "0" * 40, "git_dirty": False}


def test_setup_plans_and_says_what_it_did(probed: dict[str, ObserverStatus]) -> None:
    said: list[str] = []
    prepared = setup("all", "off", archive=False, say=said.append)
    assert said == ["mounted tracefs"]
    assert prepared.passes == ["none", "strace", "bpftrace", "perf"]
    assert prepared.skipped == {"packets": "packet capture off (--packets off)"}
    assert prepared.signer is None
    assert prepared.facts == {
        "kernel_release": "6.1",
        "source": {**SOURCE, "repo": str(ROOT)},
    }
    # only what the run uses is probed (packet capture is off here), reusing this boot's
    # proofs (lab.host.probecache), and the facts are gathered beside the passes
    assert ASKED["collectors"] == ["strace", "bpftrace", "perf"]
    assert ASKED["reuse"] == [True] and ASKED["facts"] == [False]


def test_setup_probes_only_the_collector_asked_for(probed: dict[str, ObserverStatus]) -> None:
    setup("none", "off", archive=False, say=lambda _: None)
    assert ASKED["collectors"] == []
    setup("perf", "best-effort", archive=False, say=lambda _: None)
    assert ASKED["collectors"] == ["perf", "packets"]


def test_unavailable_capture_is_skipped_or_refused(probed: dict[str, ObserverStatus]) -> None:
    probed["packets"] = down("tcpdump needs CAP_NET_RAW")
    prepared = setup("none", "best-effort", archive=False, say=lambda _: None)
    assert prepared.skipped["packets"] == "unavailable: tcpdump needs CAP_NET_RAW"
    with pytest.raises(CollectorError, match="packet capture is required but unavailable"):
        setup("none", "required", archive=False, say=lambda _: None)
    with pytest.raises(UsageError, match="--packets 'sometimes' is unknown"):
        setup("none", "sometimes", archive=False, say=lambda _: None)


def test_without_a_key_the_run_is_signed_with_an_ephemeral_one(
    probed: dict[str, ObserverStatus], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAB_SIGNING_KEY", raising=False)
    said: list[str] = []
    prepared = setup("none", "off", archive=True, say=said.append)
    assert prepared.signer is not None and prepared.signer.is_ephemeral
    assert any("ephemeral key" in line for line in said)


# --- execute refuses before writing anything --------------------------------------------------
@pytest.mark.parametrize(
    ("change", "error", "needle"),
    [
        ({"repetitions": 0}, UsageError, "--repetitions 0 must be between 1 and"),
        ({"size": 0}, UsageError, "--size 0 must be between 1 byte and"),
        ({"names": ["no-such-scenario"]}, ScenarioError, "no such scenario"),
    ],
)
def test_bad_requests_write_nothing(
    tmp_path: Path, change: dict[str, object], error: type[Exception], needle: str
) -> None:
    request = RunRequest(**{"names": ["baseline"], "out": tmp_path / "out", **change})  # type: ignore[arg-type]
    with pytest.raises(error, match=needle):
        orchestrate.execute(request, say=lambda _: None)
    assert not (tmp_path / "out").exists()


def test_a_missing_client_says_how_to_build_it(tmp_path: Path) -> None:
    request = RunRequest(names=["baseline"], out=tmp_path / "out", client=tmp_path / "nope")
    with pytest.raises(ClientError, match="make -C native"):
        orchestrate.execute(request, say=lambda _: None)
    assert not (tmp_path / "out").exists()


# --- write_results ----------------------------------------------------------------------------
def test_results_are_validated_then_written_sorted(tmp_path: Path) -> None:
    run = build_sample_run()
    write_results(run, tmp_path)
    text = (tmp_path / "results.json").read_text()
    document = json.loads(text)
    # it names the schema it matches, shipped beside it byte for byte
    assert document.pop("$schema") == "results.schema.json"
    assert text.endswith("}\n") and document == json.loads(json.dumps(run.to_dict()))
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    shipped = ROOT / "lab" / "schemas" / "results.schema.json"
    assert (tmp_path / "results.schema.json").read_bytes() == shipped.read_bytes()


def test_an_invalid_document_is_never_written(tmp_path: Path) -> None:
    run = RunResult("r", "2026-12-01T00:00:00Z", "2026-12-01T00:01:00Z", {}, observers(), {})
    write_results(run, tmp_path)  # the smallest valid document
    (tmp_path / "results.json").unlink()
    run.observers["strace"] = ObserverStatus(available="yes")  # type: ignore[arg-type]
    with pytest.raises(SchemaError, match="observers/strace/available"):
        write_results(run, tmp_path)
    assert not (tmp_path / "results.json").exists()


# --- archived_files ---------------------------------------------------------------------------
def test_archived_files_lists_every_file_but_the_reports(tmp_path: Path) -> None:
    files = {
        "results.json": b"{}\n",
        "baseline/r1/none/inv1/client.stdout": b'{"event": "complete"}\n',
        "commands.jsonl": b"",
        "report.md": b"# report\n",
        "report.pdf": b"%PDF",
    }
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    rows = archived_files(tmp_path)
    assert [r.path for r in rows] == [
        "baseline/r1/none/inv1/client.stdout",
        "commands.jsonl",
        "results.json",
    ]
    for row in rows:
        assert row.size == len(files[row.path])
        assert row.sha256 == hashlib.sha256(files[row.path]).hexdigest()


def test_the_signing_key_variable_is_spelled_as_the_signer_reads_it() -> None:
    from lab.evidence.signing import KEY_ENV
    from lab.pipeline.prepare import SIGNING_KEY_ENV

    assert SIGNING_KEY_ENV == KEY_ENV


def test_archived_files_lists_a_pending_file_as_it_will_be_written(tmp_path: Path) -> None:
    (tmp_path / "commands.jsonl").write_bytes(b"")
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "bpftrace.txt").write_bytes(b"x\n")
    (tmp_path / "results.json").write_bytes(b"stale\n")  # about to be replaced
    pending = b'{"run_id": "r"}\n'
    rows = archived_files(tmp_path, pending={"results.json": pending, "report.md": b"#\n"})
    assert [r.path for r in rows] == ["commands.jsonl", "results.json", "sessions/bpftrace.txt"]
    row = rows[1]
    assert row.size == len(pending) and row.sha256 == hashlib.sha256(pending).hexdigest()
