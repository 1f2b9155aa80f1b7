"""The instrument check of ``lab evaluate``: the seeded ``false-success`` and
``unexpected-egress`` run on this machine with the evaluation's collectors, and the lab must
catch them (C1 and C6, and C3, fail) before it judges a candidate. Checked in this run, or
kept in the signed archive of an earlier evaluation under the same ``--out`` and reused.

    key = check_key(request, prepared, calibration)
    lookup = Lookup(request, prepared, out, calibration)  # on a thread, beside the build
    check, results = instrument(request, prepared, run_dir, calibration, say=print, lookup=lookup)
    check.reused_from        # None: checked in this run (results: its two scenarios)
    keep(run_dir.parent, check, archive_path, run_id)   # after the archive is sealed

What decides whether the lab catches them is the lab's own source (its scenarios, judges and
collectors), the seeded client's binary, the collectors and packet mode asked for, the
fixture's size and the time limit, the sandbox's bounds, and the machine: its kernel and this
boot of it, the tools' versions, the capabilities and settings the observers depend on, and
which observers the probes found working. All of them are the check's key
(``lab.evidence.kept``); an evaluation reuses a check only under the same key, on the same
boot, from an archive that still verifies, and says so in its record and its reports
(``instrument_check.reused_from``). What the reuse trades: the check is as old as the
archive it came from, within one boot. An observer that stopped working since (a setting
changed by hand) would have failed a fresh check and refused the evaluation; with a reused
one the evaluation goes on and the candidate's passes record that observer as missing,
never as a zero. A check that failed is never kept, and ``--recalibrate`` checks again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import lab
from lab import resources
from lab.evaluate.request import EvaluationRequest
from lab.evaluate.verdicts import instrument_check
from lab.evidence.kept import KEPT_ERRORS, Key, lab_source_digest, open_kept, point
from lab.evidence.signing import Signer
from lab.host.digest import sha256_file
from lab.host.live import Beside
from lab.host.probecache import BOOT_ID
from lab.model import ScenarioResult
from lab.model.evaluation import InstrumentCheck
from lab.pipeline import Setup, run_plan
from lab.run.plan import Plan
from lab.sandbox import SandboxSettings
from lab.workloads.backup.scenario import Scenario

#: the machine's facts (``lab doctor``'s) a check's outcome depends on
MACHINE_FACTS = (
    "kernel_release",
    "machine",
    "cpu_model",
    "is_root",
    "capability_mask",
    "btf",
    "perf_event_paranoid",
    "ibs_op",
    "tool_versions",
)
#: the key's boot id when /proc names none: a check is then neither kept nor reused
UNKNOWN_BOOT = "unknown"


def check_key(request: EvaluationRequest, prepared: Setup, calibration: list[Scenario]) -> Key:
    """Every input the instrument check's outcome depends on, and their digest."""
    facts, client = prepared.facts, resources.native_client()
    try:
        boot = BOOT_ID.read_text().strip()
    except OSError:
        boot = UNKNOWN_BOOT
    parts: dict[str, Any] = {
        "lab_source": lab_source_digest(),
        "lab_version": lab.__version__,
        "seeded_client": sha256_file(client) if client.is_file() else "missing",
        "scenarios": {
            s.path.name: hashlib.sha256(s.text.encode()).hexdigest() for s in calibration
        },
        "passes": list(prepared.passes),
        "unavailable": dict(sorted(prepared.skipped.items())),
        "observers": {name: s.available for name, s in sorted(prepared.observers.items())},
        "packets": request.packets,
        "size": request.size,
        "timeout_s": request.timeout_s,
        "sandbox": SandboxSettings().to_dict(),
        "machine": {name: facts.get(name) for name in MACHINE_FACTS},
        "boot_id": boot,
    }
    return Key.of(parts)


def run_check(
    request: EvaluationRequest,
    prepared: Setup,
    run_dir: Path,
    calibration: list[Scenario],
    say: Callable[[str], None],
) -> tuple[InstrumentCheck, list[ScenarioResult]]:
    """Run the seeded ``false-success`` and ``unexpected-egress`` here, with these
    collectors, and say whether the lab caught them (``lab campaign`` does it once)."""
    say("Checking the instrument on this machine (false-success, unexpected-egress)…")
    cal_plan = Plan(
        scenarios=calibration,
        passes=prepared.passes,
        packets=request.packets,
        size=request.size,
        client=resources.native_client(),
        timeout_s=request.timeout_s,
        unavailable=prepared.skipped,
        seed="calibration",
        jobs=prepared.jobs,
    )
    cal_results = run_plan(cal_plan, run_dir, prepared, say)
    return instrument_check(cal_results), cal_results


class Lookup:
    """The check's key and the kept check it names, looked up on a thread of its own from
    the moment it is made (``lab evaluate`` makes it before the candidate's build, which is
    mostly waiting on ``make``: the key waits on the machine's facts, and verifying the kept
    archive takes about 0.2 s). What the lookup would have said is said when it is taken,
    in order, on the caller's thread.

        lookup = Lookup(request, prepared, out, calibration)
        ...                                            # the candidate is built
        key, found, said = lookup.take()
    """

    def __init__(
        self,
        request: EvaluationRequest,
        prepared: Setup,
        out: Path,
        calibration: list[Scenario],
    ) -> None:
        self.key: Key | None = None
        self.found: InstrumentCheck | None = None
        self.said: list[str] = []

        def look() -> None:
            self.key = check_key(request, prepared, calibration)
            if not request.recalibrate:
                self.found = find_kept(out, self.key, signer=prepared.signer, say=self.said.append)

        self._beside = Beside(look, name="instrument check lookup")

    def take(self) -> tuple[Key, InstrumentCheck | None, list[str]]:
        """The key, the kept check (None: none to reuse), and what the lookup said; raises
        what the lookup raised."""
        self._beside.join()
        assert self.key is not None  # set before anything else could fail silently
        return self.key, self.found, self.said

    def abandon(self) -> None:
        """Wait for a lookup that is not taken (the candidate did not build)."""
        self._beside.join(raise_error=False)


def instrument(
    request: EvaluationRequest,
    prepared: Setup,
    run_dir: Path,
    calibration: list[Scenario],
    say: Callable[[str], None],
    lookup: Lookup | None = None,
) -> tuple[InstrumentCheck, list[ScenarioResult]]:
    """The check kept under this evaluation's key in ``--out`` (no scenario run here), or,
    without one or with ``--recalibrate``, a check run now (its two scenarios' results),
    recorded with its key. ``lookup``: the key and kept check already being looked up."""
    if lookup is None:
        lookup = Lookup(request, prepared, run_dir.parent, calibration)
    key, found, said = lookup.take()
    for line in said:
        say(line)
    if found is not None and found.reused_from is not None:
        source = found.reused_from
        say(
            f"Instrument check: {'caught' if found.ok else 'missed'} the seeded defects, "
            f"reused from {source['archive']} (sha256 {source['archive_sha256']}, key "
            f"{key.digest}); --recalibrate checks again"
        )
        return found, []
    check, results = run_check(request, prepared, run_dir, calibration, say)
    return replace(check, key=key.digest, parts=dict(key.parts)), results


def find_kept(
    out: Path, key: Key, *, signer: Signer | None, say: Callable[[str], None]
) -> InstrumentCheck | None:
    """The check kept in the archive ``key`` points at under ``out``, or None (and why,
    said, when a pointer was there but could not be taken)."""
    if key.parts.get("boot_id") == UNKNOWN_BOOT:
        return None  # no boot to tie a kept check to
    try:
        found = open_kept(out, key.digest, signer=signer, what="instrument check")
        if found is None:
            return None
        results, source = found
        evaluation = results.get("evaluation") or {}
        kept = InstrumentCheck.from_dict(evaluation["instrument_check"])
        if kept.key != key.digest or kept.parts != key.parts:
            raise ValueError(f"{source['archive']} holds an instrument check under another key")
        if not kept.ok or kept.reused_from is not None:
            raise ValueError(f"{source['archive']} holds no instrument check that caught both")
    except KEPT_ERRORS as error:
        say(f"Instrument check: not reused ({error}); it runs again.")
        return None
    return replace(kept, reused_from=source)


def keep(out: Path, check: InstrumentCheck | None, archive: Path | None, run_id: str) -> bool:
    """Point the check's key at the sealed archive of the evaluation that ran it (a check
    run in this evaluation that caught both; nothing for a reused or failed one, or an
    unsigned run); True when it did."""
    if check is None or check.key is None or check.reused_from is not None:
        return False
    if not check.ok or archive is None or check.parts.get("boot_id") == UNKNOWN_BOOT:
        return False
    point(out, check.key, archive, run_id)
    return True
