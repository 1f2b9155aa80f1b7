"""The perf collector: CPU samples by symbol, with inclusive ("children") weight.

It samples AMD IBS ``ibs_op`` when the CPU and kernel expose it, and the software
``cpu-clock`` event otherwise; the summary says which event ran and why. Call chains are
unwound with DWARF (``--call-graph dwarf``): the client is built without frame pointers and
OpenSSL's assembly uses ``%rbp`` as a general register, so frame-pointer chains skip the very
function (``hash_file``) whose inclusive weight we want.

    collector = PerfCollector()
    status = PerfCollector.probe()              # ObserverStatus
    argv = collector.wrap(client_argv, ctx)     # perf record ... -- CLIENT ...
    completed = lab.host.procs.run(argv, ...)        # perf passes the client's exit status through
    out = collector.collect(ctx, completed)     # perf report / --stats / annotate, parsed
    out.summary.top_client_symbol              # e.g. "busy_wait"

The parsers (:func:`parse_report` and :func:`parse_stats`, in ``lab.collectors.perf_parse``,
and :func:`summarize`) are pure functions over perf's text output so that captured outputs
can be tested.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from lab.collectors import perf_kallsyms
from lab.collectors.base import CollectorOutput, InvocationContext, ProcessCollector
from lab.collectors.perf_event import (
    PARANOID_PATH,
    EventChoice,
    _privileged,
    choose_event,
    paranoid_blocks,
    read_paranoid,
)
from lab.collectors.perf_parse import (
    PerfParseError,
    PerfStats,
    SymbolRow,
    parse_report,
    parse_stats,
)
from lab.errors import ToolMissingError
from lab.host.probecache import sysctl_bytes
from lab.host.procs import Completed, require_tool, run
from lab.model import ObserverStatus
from lab.model.observed import PerfSummary

#: functions every C program runs through; they are never "the client's hot function"
ENTRY_POINTS = frozenset(
    {"main", "_start", "__libc_start_main", "__libc_start_call_main", "__libc_start_main_impl"}
)
TOP_SYMBOLS = 15
#: perf report and annotate must never page or open the TUI
PERF_ENV_OVERRIDES = {"PAGER": "cat", "PERF_PAGER": "cat", "TERM": "dumb"}
REPORT_TIMEOUT_S = 600.0
#: options of every ``perf record``: quiet (perf's messages would otherwise land in the
#: client's stderr), no build-id cache (nothing written to ~/.debug), and no BPF side-band
#: events. The last is time, not evidence: perf's side-band thread, which records BPF
#: program loads to symbolise samples in JIT-compiled BPF code, polls with a one-second
#: timeout and holds every ``perf record`` open about 1 s after its command exits (measured:
#: 1.11 s → 0.16 s for ``/bin/true``): the client cannot load BPF, so no sample lands in one.
#: ``-k mono --timestamp-boundary``: samples on the timeline's clock, window in the header
RECORD_OPTIONS = ("-q", "-N", "--no-bpf-event", "-k", "mono", "--timestamp-boundary")

#: ``perf report``'s view: inclusive ("children") weight by symbol and object, as text
REPORT_OPTIONS = ("--children", "--stdio", "--sort", "symbol,dso")

REPORT_FILE = "perf-report.txt"
STATS_FILE = "perf-stats.txt"
ANNOTATE_FILE = "perf-annotate.txt"
DATA_FILE = "perf.data"


def top_client_symbol(rows: Sequence[SymbolRow], client_names: Sequence[str]) -> str | None:
    """The client's own function with the largest inclusive weight, entry points excluded.

    Ties (a caller whose time is all in one callee shows the same inclusive percentage) go
    to the larger self weight, i.e. towards the callee that actually burns the time; then
    to the name, so the answer is deterministic.
    """
    candidates = [
        r for r in rows if r.level == "." and r.dso in client_names and r.symbol not in ENTRY_POINTS
    ]
    if not candidates:
        return None
    best = min(candidates, key=lambda r: (-r.inclusive_pct, -r.self_pct, r.symbol))
    return best.symbol


def _empty_summary(choice: EventChoice, stats: PerfStats) -> PerfSummary:
    """perf read the file and it simply holds no sample: a real observation of zero."""
    if stats.lost_sample_records:
        raise PerfParseError(
            "perf.data holds no sample but records lost samples, so the count is unknown"
        )
    return PerfSummary(
        event=choice.event,
        event_reason=choice.reason,
        samples=0,
        lost_samples=0,
        lost_chunks=stats.lost_chunks or 0,
        event_count=0,
    )


def summarize(
    report_text: str,
    stats_text: str,
    choice: EventChoice,
    client_names: Sequence[str],
    report_stderr: str = "",
) -> PerfSummary:
    """The ``observed.perf`` summary; raises :class:`PerfParseError` with one sentence.

    ``report_text`` is ``perf report --children --stdio --sort symbol,dso``, ``stats_text``
    is ``perf report --stats`` (exact counts: the report header abbreviates "8K").
    """
    report = parse_report(report_text)
    stats = parse_stats(stats_text, choice.perf_event)
    section = next((s for s in report.sections if s.event == choice.perf_event), None)
    if section is None:
        if not report.sections:
            if "has no samples" in report_stderr and stats.total_events is not None:
                return _empty_summary(choice, stats)
            raise PerfParseError(
                f"perf report printed no '# Samples' header for event '{choice.perf_event}' "
                "(perf.data truncated or unreadable)"
            )
        names = ", ".join(s.event for s in report.sections)
        raise PerfParseError(f"perf report shows samples of {names}, not of '{choice.perf_event}'")
    if report.lost_samples is None:
        raise PerfParseError("perf report printed no '# Total Lost Samples' header line")
    if stats.samples is not None:
        samples = stats.samples
    elif section.samples_exact:
        samples = section.samples
    else:
        raise PerfParseError(
            f"perf report abbreviates the sample count ('{section.samples_text}') and "
            "perf report --stats gave no exact SAMPLE count"
        )
    if section.samples_exact and section.samples != samples:
        raise PerfParseError(
            f"perf report counts {section.samples} samples but perf report --stats counts {samples}"
        )
    if stats.lost_samples is not None and stats.lost_samples != report.lost_samples:
        raise PerfParseError(
            f"perf report counts {report.lost_samples} lost samples but perf report --stats "
            f"counts {stats.lost_samples}"
        )
    rows = sorted(report.rows, key=lambda r: (-r.inclusive_pct, -r.self_pct, r.symbol, r.dso))
    top_client = top_client_symbol(rows, client_names)
    top_client_pct = next(
        (r.inclusive_pct for r in rows if r.symbol == top_client and r.dso in client_names), None
    )
    return PerfSummary(
        event=choice.event,
        event_reason=choice.reason,
        samples=samples,
        lost_samples=report.lost_samples,
        lost_chunks=stats.lost_chunks or 0,
        event_count=section.event_count,
        top_symbols=tuple(r.kept() for r in rows[:TOP_SYMBOLS]),
        top_client_symbol=top_client,
        top_client_inclusive_pct=top_client_pct,
    )


def annotated_symbol(
    report_text: str, symbol: str | None, client_names: Sequence[str]
) -> str | None:
    """The top client symbol when ``perf annotate`` has something to show for it, else None.

    ``perf annotate`` spreads a symbol's *self* samples over its instructions; a symbol whose
    weight is all in its callees (``hash_file``, whose time is in libcrypto's SHA-256) has
    none, and perf then prints only "has no samples" after reading the whole file (about
    0.4 s of DWARF-sampled data per invocation): nothing of the evidence is lost by not
    asking.
    """
    if symbol is None:
        return None
    rows = parse_report(report_text).rows
    own = [r for r in rows if r.symbol == symbol and r.dso in client_names and r.level == "."]
    return symbol if any(r.self_pct > 0 for r in own) else None


def _perf_env() -> dict[str, str]:
    return {**os.environ, **PERF_ENV_OVERRIDES}


class PerfCollector(ProcessCollector):
    name: ClassVar[str] = "perf"
    # perf record waits for its workload and exits with the workload's status (or dies of
    # the same signal), so every status is the client's.
    accepted_status: ClassVar[tuple[int, ...] | None] = None
    # collect runs perf report/annotate on the perf.data the record left, nothing else
    deferrable: ClassVar[bool] = True

    def __init__(self, *, choice: EventChoice | None = None) -> None:
        self.choice = choice if choice is not None else choose_event()

    @classmethod
    def probe_inputs(cls) -> list[bytes]:
        """What the probe's outcome depends on besides the kernel, the binary and the
        privileges (``lab.host.probecache``): kernel.perf_event_paranoid."""
        return sysctl_bytes(PARANOID_PATH)

    @classmethod
    def probe(cls) -> ObserverStatus:
        try:
            perf = require_tool("perf")
        except ToolMissingError as exc:
            return ObserverStatus(False, str(exc))
        paranoid = read_paranoid()
        privileged = _privileged()
        choice = choose_event()
        detail: dict[str, Any] = {
            "perf_event_paranoid": paranoid,
            "privileged": privileged,
            "event": choice.event,
            "event_reason": choice.reason,
        }
        if paranoid_blocks(paranoid, privileged):
            return ObserverStatus(
                False,
                f"kernel.perf_event_paranoid is {paranoid}, which forbids profiling without "
                "privilege; run the lab as root or set it to 2 "
                "(sysctl kernel.perf_event_paranoid=2)",
                detail,
            )
        # an absolute path: the probe must not depend on what PATH happens to hold
        true = shutil.which("true") or "/bin/true"
        with tempfile.TemporaryDirectory(prefix="lab-perf-probe-") as tmp:
            data = Path(tmp) / "probe.data"
            err = Path(tmp) / "stderr.txt"
            done = run(
                [perf, "record", *RECORD_OPTIONS, "-e", "cpu-clock", "-o", str(data), "--", true],
                purpose="perf probe",
                stderr=err,
                timeout=60.0,
                accept=None,
            )
            if done.exit_status != 0 or not data.exists():
                status = "timed out" if done.timed_out else f"exited with status {done.exit_status}"
                excerpt = done.stderr_excerpt().splitlines()
                tail = f" ({excerpt[0]})" if excerpt else ""
                return ObserverStatus(
                    False,
                    f"perf record -e cpu-clock {status} here{tail}; check "
                    "kernel.perf_event_paranoid and that perf matches the running kernel",
                    detail,
                )
        return ObserverStatus(True, None, detail)

    def wrap(self, client_argv: list[str], ctx: InvocationContext) -> list[str]:
        perf = require_tool("perf")
        # the pass's copy of the kernel's symbol table over /proc/kallsyms, for perf alone
        return [
            *perf_kallsyms.bind_prefix(perf_kallsyms.snapshot(ctx.scratch)),
            perf,
            "record",
            *RECORD_OPTIONS,
            "-e",
            self.choice.perf_event,
            *self.choice.sampling,
            "--call-graph",
            "dwarf",
            "-o",
            str(ctx.out_dir / DATA_FILE),
            "--",
            *client_argv,
        ]

    @staticmethod
    def _kallsyms(ctx: InvocationContext) -> list[str]:
        """The pass's copy of the kernel's symbol table for perf report (lab.collectors.
        perf_kallsyms), or nothing: perf then reads /proc/kallsyms itself."""
        return perf_kallsyms.kallsyms_args(perf_kallsyms.snapshot(ctx.scratch))

    def _perf(self, ctx: InvocationContext, args: list[str], out: str, purpose: str) -> Completed:
        return run(
            [require_tool("perf"), *args],
            purpose=purpose,
            log=ctx.log,
            stdout=ctx.out_dir / out,
            stderr=ctx.out_dir / (Path(out).stem + ".stderr.txt"),
            env=_perf_env(),
            timeout=REPORT_TIMEOUT_S,
            accept=None,  # perf report exits 0 even on a truncated file; we judge the text
        )

    def collect(self, ctx: InvocationContext, completed: Completed) -> CollectorOutput:
        data = ctx.out_dir / DATA_FILE
        if not data.exists() or data.stat().st_size == 0:
            excerpt = completed.stderr_excerpt().splitlines()
            tail = f": {excerpt[-1]}" if excerpt else ""
            return CollectorOutput(
                self.name,
                None,
                error=(
                    f"perf record left no {DATA_FILE} (exit status {completed.exit_status}){tail}"
                ),
            )
        artifacts = [ctx.relative(data)]
        data_arg = str(data)
        report = self._perf(
            ctx,
            ["report", "-i", data_arg, *self._kallsyms(ctx), *REPORT_OPTIONS],
            REPORT_FILE,
            "perf report (inclusive weight by symbol)",
        )
        stats = self._perf(
            ctx, ["report", "-i", data_arg, "--stats"], STATS_FILE, "perf report --stats"
        )
        for done in (report, stats):
            for path in (done.stdout_path, done.stderr_path):
                if path:
                    artifacts.append(ctx.relative(Path(path)))
        client = Path(ctx.client_path)
        names = [client.name]
        if client.resolve().name != client.name:
            names.append(client.resolve().name)
        report_stderr = _read(ctx.out_dir / (Path(REPORT_FILE).stem + ".stderr.txt"))
        try:
            summary = summarize(
                _read(ctx.out_dir / REPORT_FILE),
                _read(ctx.out_dir / STATS_FILE),
                self.choice,
                names,
                report_stderr,
            )
        except PerfParseError as exc:
            first = next((ln.strip() for ln in report_stderr.splitlines() if ln.strip()), "")
            tail = f" (perf said: {first})" if first else ""
            return CollectorOutput(self.name, None, artifacts=artifacts, error=f"{exc}{tail}")
        symbol = annotated_symbol(
            _read(ctx.out_dir / REPORT_FILE), summary.top_client_symbol, names
        )
        if symbol is not None:
            annotate = self._perf(
                ctx,
                ["annotate", "-i", data_arg, "--stdio", "-s", symbol],
                ANNOTATE_FILE,
                f"perf annotate {symbol}",
            )
            if annotate.stdout_path:
                artifacts.append(ctx.relative(Path(annotate.stdout_path)))
        return CollectorOutput(self.name, summary, artifacts=artifacts)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
