"""The plan stage every command shares: which observers work here and which passes a run
makes (``setup``), the signer, the run's private directory and its sandbox (``open_run``).
``lab.pipeline.stages`` re-exports all of it.

    prepared = setup(collector, packets, archive=True, say=say)   # observers, passes, signer
    run_dir = open_run(prepared, out, new_run_id(), sandbox="required")
    prepared.facts, prepared.signer      # made beside the first passes; reading them waits
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.errors import CollectorError, LabError, UsageError
from lab.model import ObserverStatus
from lab.registry import CAPTURE, COLLECTOR_NAMES, PROCESS_COLLECTORS
from lab.run.schedule import Concurrency, decide
from lab.sandbox import Sandbox, SandboxSettings

if TYPE_CHECKING:
    from lab.evidence.signing import Signer

COLLECTOR_CHOICES = ("none", *PROCESS_COLLECTORS, "all")
PACKET_CHOICES = ("off", "best-effort", "required")
SANDBOX_CHOICES = ("required", "off")


def new_run_id(prefix: str = "run") -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}-{stamp}-{secrets.token_hex(3)}"


def plan_passes(
    collector: str, observers: dict[str, ObserverStatus]
) -> tuple[list[str], dict[str, str]]:
    """The passes to run and, for every collector that will not run, why."""
    if collector not in COLLECTOR_CHOICES:
        known = ", ".join(COLLECTOR_CHOICES)
        raise UsageError(f"--collector {collector!r} is unknown; one of {known}.")
    wanted = list(PROCESS_COLLECTORS) if collector == "all" else [collector]
    passes = ["none"]
    skipped: dict[str, str] = {}
    for name in PROCESS_COLLECTORS:
        status = observers.get(name)
        if name not in wanted:
            skipped[name] = f"not selected (--collector {collector})"
        elif status is None or not status.available:
            skipped[name] = f"unavailable: {status.reason if status else 'not probed'}"
        else:
            passes.append(name)
    return passes, skipped


@dataclass
class Setup:
    """What every run needs before its first pass: observers, passes, the signer.

    The machine's facts (tool versions: eight commands; the source's git state: two) and an
    ephemeral signing key are made on threads of their own once the first client runs
    (``later``: the run's critical path, from the command to its longest pass, is then not
    slowed by them: the passes' own set-up holds the interpreter lock, a client's run does
    not); reading ``facts`` or ``signer`` starts them if nothing did and waits. A key named by
    ``LAB_SIGNING_KEY`` is read before anything runs, so that a bad one stops the run at
    once with its sentence."""

    observers: dict[str, ObserverStatus]
    passes: list[str]
    skipped: dict[str, str]
    facts_later: Future[dict[str, Any]]
    actions: list[str]
    signer_later: Future[Signer | None]
    #: what is made beside the passes, started by ``later.begin()`` (the runner calls it
    #: as the run's first client starts: ``Runner.client_started``)
    later: Later = field(default_factory=lambda: Later())
    #: the run's sandbox; None with --sandbox off
    sandbox: Sandbox | None = None
    #: what results.json records of it
    sandbox_record: dict[str, Any] = field(default_factory=dict)
    #: how many passes may run at once (``open_run`` decides it; lab.run.schedule)
    concurrency: Concurrency = field(default_factory=lambda: Concurrency(1, 1))

    @property
    def jobs(self) -> int:
        return self.concurrency.jobs

    @property
    def facts(self) -> dict[str, Any]:
        self.later.begin()
        return self.facts_later.result()

    @property
    def signer(self) -> Signer | None:
        self.later.begin()
        return self.signer_later.result()

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()


class Later:
    """Work held until ``begin()``, then run on two threads; each ``add`` returns the future
    of its result (``begin`` is idempotent and safe from any thread)."""

    def __init__(self) -> None:
        self._work: list[tuple[Callable[[], Any], Future[Any]]] = []
        self._lock = threading.Lock()
        self._begun = False

    def add(self, work: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            self._work.append((work, future))
            begun = self._begun
        if begun:
            _settle(work, future)
        return future

    def begin(self) -> None:
        with self._lock:
            if self._begun:
                return
            self._begun = True
            work, self._work = self._work, []
        if work:
            pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lab-setup")
            for fn, future in work:
                pool.submit(_settle, fn, future)
            pool.shutdown(wait=False)


def _settle(work: Callable[[], Any], future: Future[Any]) -> None:
    try:
        future.set_result(work())
    except BaseException as exc:  # raised where the result is read
        future.set_exception(exc)


def done(value: Any) -> Future[Any]:
    """A future that already holds ``value``."""
    future: Future[Any] = Future()
    future.set_result(value)
    return future


def open_sandbox(
    mode: str, run_id: str, *, settings: SandboxSettings, masked: list[Path], log_path: Path
) -> tuple[Sandbox | None, dict[str, Any]]:
    """The run's sandbox, or None with ``--sandbox off`` (said loudly, recorded)."""
    if mode not in SANDBOX_CHOICES:
        raise UsageError(f"--sandbox {mode!r} is unknown; one of {', '.join(SANDBOX_CHOICES)}.")
    if mode == "off":
        return None, {
            "enabled": False,
            "why": "--sandbox off: the client ran as the lab's user, outside any sandbox",
        }
    from lab.host.procs import CommandLog

    sandbox = Sandbox.open(
        run_id, settings=settings, masked=masked, log=CommandLog(log_path, root=log_path.parent)
    )
    return sandbox, sandbox.describe()


def open_run(
    prepared: Setup, out: Path, run_id: str, *, sandbox: str = "required", jobs: int = 1
) -> Path:
    """The run's directory, private (0700: its evidence is for the lab and the reviewer,
    never for the client), with the run's sandbox opened into ``prepared``; when the sandbox
    cannot open, the directory is removed and the error raised. ``jobs``: the passes asked
    to run at once (``--jobs``); what may is ``prepared.concurrency``, and the sandbox then
    holds one client user for each (``Sandbox.use_slots``)."""
    run_dir = (out / run_id).resolve()
    run_dir.mkdir(parents=True, exist_ok=False)
    run_dir.chmod(0o700)
    try:
        prepared.sandbox, prepared.sandbox_record = open_sandbox(
            sandbox,
            run_id,
            settings=SandboxSettings(),
            masked=signing_key_paths(),
            log_path=run_dir / "commands.jsonl",
        )
        prepared.concurrency = decide(jobs, sandboxed=prepared.sandbox is not None)
        if prepared.sandbox is not None:
            prepared.sandbox.use_slots(prepared.concurrency.jobs)
            prepared.sandbox_record = prepared.sandbox.describe()
    except LabError:
        if prepared.sandbox is not None:
            with contextlib.suppress(LabError):
                prepared.sandbox.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return run_dir


def setup(collector: str, packets: str, *, archive: bool, say: Callable[[str], None]) -> Setup:
    from lab.host import doctor as doctor_mod

    if packets not in PACKET_CHOICES:
        raise UsageError(f"--packets {packets!r} is unknown; one of {', '.join(PACKET_CHOICES)}.")
    wanted = list(PROCESS_COLLECTORS) if collector == "all" else [collector]
    wanted = [c for c in wanted if c != "none"]
    if packets != "off":
        wanted.append(CAPTURE)
    # a run may reuse this boot's earlier proof of bpftrace and perf (lab.host.probecache);
    # python -m lab doctor always probes afresh
    doc = doctor_mod.check(mount=True, collectors=wanted, facts=False, reuse=True)
    later = Later()
    facts = later.add(_facts)
    for name in COLLECTOR_NAMES:
        # what was not asked for was not probed: said so, never probed as absent
        doc.observers.setdefault(
            name, ObserverStatus(False, "not probed: not selected for this run")
        )
    for action in doc.actions:
        say(action)
    observers = doc.observers
    passes, skipped = plan_passes(collector, observers)
    if packets == "required" and not observers[CAPTURE].available:
        raise CollectorError(
            f"packet capture is required but unavailable: {observers[CAPTURE].reason}; "
            "rerun with --packets best-effort or fix it (python -m lab doctor)."
        )
    if packets == "off":
        skipped[CAPTURE] = "packet capture off (--packets off)"
    elif not observers[CAPTURE].available:
        skipped[CAPTURE] = f"unavailable: {observers[CAPTURE].reason}"
    signer: Future[Signer | None] = done(None)
    if archive:
        signer = _signer(later, say)
    return Setup(
        observers=observers,
        passes=passes,
        skipped=skipped,
        facts_later=facts,
        actions=list(doc.actions),
        signer_later=signer,
        later=later,
    )


def _facts() -> dict[str, Any]:
    """The machine's facts (doctor's) and the lab source's git state, read beside the
    passes."""
    from lab import resources
    from lab.host import doctor as doctor_mod
    from lab.host import identity

    return {**doctor_mod.gather_facts(), "source": identity.source_state(resources.package_root())}


def _signer(later: Later, say: Callable[[str], None]) -> Future[Signer | None]:
    """The run's signer: the key ``LAB_SIGNING_KEY`` names, read now (a bad one is an error
    before anything runs), or an ephemeral key made on ``later`` (cryptography's import and
    the key's generation, ~25 ms, beside the first passes)."""
    if os.environ.get(SIGNING_KEY_ENV, "").strip():
        from lab.evidence.signing import Signer

        return done(Signer.from_env())
    say(
        "No signing key configured (LAB_SIGNING_KEY): this run is signed with an "
        "ephemeral key, so the archive proves integrity but not authenticity."
    )
    return later.add(_ephemeral)


def _ephemeral() -> Signer:
    from lab.evidence.signing import Signer

    return Signer.ephemeral()


#: ``lab.evidence.signing.KEY_ENV``, spelled here so that reading it imports no cryptography
SIGNING_KEY_ENV = "LAB_SIGNING_KEY"


def signing_key_paths() -> list[Path]:
    """Files that hold a signing key, hidden inside the sandbox even if they fall within a
    directory the sandbox shows (``LAB_SIGNING_KEY`` naming a file)."""
    value = os.environ.get(SIGNING_KEY_ENV, "")
    if value and "\n" not in value and len(value) < 4096:
        path = Path(value)
        with contextlib.suppress(OSError):
            if path.is_file():
                return [path.resolve()]
    return []
