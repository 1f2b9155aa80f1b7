"""Realistic sample runs for the report tests, built through the model's dataclasses.

Figures follow the brief and the first seed article where they are deterministic (connect
counts 2/1 and 3/2, 524,288 and 589,824 payload bytes, 256 ``hash_file`` entries, 134,217,728
logical source bytes, the verbatim ``@hash_calls: 256`` map block); timings and sample counts
are plausible values for a 2-core machine using perf's software ``cpu-clock`` event.

    run = build_sample_run()       # 8 scenarios x 4 passes, every observer available
    run = build_degraded_run()     # only the untraced pass: strace/bpftrace/perf/packets absent
    run = build_repeated_run()     # repetitions (N = 3, 2, 1), aggregates, a candidate evaluation

``python tests/unit/reports/reports_sample.py > tests/assets/reports/sample-results.json``
regenerates the JSON copy that other presenters and schema tests can read.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from lab.judge.aggregate import aggregate
from lab.model import (
    CLAUSES,
    BpftraceSummary,
    ClientClaim,
    DecoySummary,
    Finding,
    Invocation,
    Observed,
    ObserverStatus,
    Outcome,
    PacketSummary,
    Pass,
    PerfSummary,
    ReceiverSummary,
    RunResult,
    ScenarioResult,
    StraceSummary,
    Verdict,
    VerifierCheck,
)
from lab.model.evaluation import Evaluation
from lab.model.observed import PerfSymbol

SIZE = 524_288
SOURCE_SHA = hashlib.sha256(b"evidence-lab source seed 1 size 524288").hexdigest()
OLDER_SHA = hashlib.sha256(b"evidence-lab older backup seed 7").hexdigest()
CLIENT_SHA = hashlib.sha256(b"backup-client build 0.1.0").hexdigest()
HAVE_LINE = 75  # bytes of "HAVE <digest> <size>\n" as the article's @sent_bytes shows
PUT_LINE = 74
OTHER_READS = 15_841  # the article: @read_bytes 134,233,569 - 134,217,728 source bytes
PERF_REASON = (
    "ibs_op is not exposed by this CPU (no /sys/bus/event_source/devices/ibs_op); "
    "using the software cpu-clock event"
)

#: Per collector: multiplier on the untraced wall and CPU time, and a fixed start-up cost.
TRACER_COST: dict[str, tuple[float, float, float]] = {
    "none": (1.0, 1.0, 0.0),
    "strace": (2.9, 1.6, 0.004),
    "bpftrace": (1.15, 1.1, 1.62),
    "perf": (1.12, 1.08, 0.021),
}


@dataclass
class InvSpec:
    """Everything one invocation of one scenario did, in the untraced pass."""

    exit_status: int = 0
    completion: dict[str, Any] | None = field(
        default_factory=lambda: {"event": "complete", "status": "ok"}
    )
    connections: int = 1
    decoy: int = 0
    payload: int = 0
    attempts: int = 0
    committed: bool = False
    rejected: int = 0
    dropped: int = 0
    have_answers: list[str] = field(default_factory=lambda: ["YES"])
    held: bool = True
    decisions: list[str] = field(default_factory=list)
    backup_exists: bool = True
    backup_sha: str | None = SOURCE_SHA
    hash_calls: int = 1
    busy_wait_calls: int = 0
    source_bytes: int = SIZE
    switches_out: int = 3
    wall_s: float = 0.0112
    cpu_s: float = 0.0088
    perf_samples: int = 38
    top_symbols: list[dict[str, Any]] = field(default_factory=list)
    top_client_symbol: str = "hash_file"


def _symbols(*rows: tuple[str, str, float, float]) -> list[dict[str, Any]]:
    return [{"symbol": s, "dso": d, "inclusive_pct": i, "self_pct": p} for s, d, i, p in rows]


BASE_SYMBOLS = _symbols(
    ("main", "backup-client", 97.4, 0.0),
    ("hash_file", "backup-client", 71.1, 0.3),
    ("sha256_block_data_order_avx2", "libcrypto.so.3", 63.2, 63.2),
    ("send_payload", "backup-client", 18.4, 0.0),
    ("copy_user_enhanced_fast_string", "[kernel.kallsyms]", 14.9, 14.9),
)
#: the top 15 rows of tests/assets/perf/native-hash-storm: libcrypto's unresolved addresses
#: (once DSO-relative with the self weight, once absolute) crowd the client's own function
STORM_SYMBOLS = _symbols(
    ("hash_file", "backup-client", 95.7, 0.0),
    ("SHA256_Update", "libcrypto.so.3", 80.65, 0.0),
    ("do_syscall_64", "[kernel.kallsyms]", 13.98, 2.15),
    ("__GI___libc_read (inlined)", "libc.so.6", 13.98, 0.0),
    ("entry_SYSCALL_64_after_hwframe", "[kernel.kallsyms]", 13.98, 0.0),
    ("filemap_read", "[kernel.kallsyms]", 11.83, 0.0),
    ("ksys_read", "[kernel.kallsyms]", 11.83, 0.0),
    ("vfs_read", "[kernel.kallsyms]", 11.83, 0.0),
    ("copy_page_to_iter", "[kernel.kallsyms]", 8.6, 1.08),
    ("_copy_to_iter", "[kernel.kallsyms]", 7.53, 7.53),
    ("0x000000000029dd4f", "libcrypto.so.3", 5.38, 5.38),
    ("0x000000000029dd63", "libcrypto.so.3", 5.38, 5.38),
    ("0x000000000029ddc3", "libcrypto.so.3", 5.38, 5.38),
    ("0x000000000029de4a", "libcrypto.so.3", 5.38, 5.38),
    ("0x00007fdfe629dd4f", "libcrypto.so.3", 5.38, 0.0),
)
SPIN_SYMBOLS = _symbols(
    ("main", "backup-client", 99.8, 0.0),
    ("busy_wait", "backup-client", 97.9, 97.9),
    ("hash_file", "backup-client", 1.6, 0.0),
    ("sha256_block_data_order_avx2", "libcrypto.so.3", 1.4, 1.4),
)


def _first(**kw: Any) -> InvSpec:
    """A first invocation that uploads the source once (the baseline's first run)."""
    spec = InvSpec(
        connections=2,
        payload=SIZE,
        attempts=1,
        committed=True,
        have_answers=["NO"],
        held=False,
        decisions=["committed"],
        wall_s=0.0141,
        cpu_s=0.0102,
        perf_samples=46,
        top_symbols=BASE_SYMBOLS,
    )
    for k, v in kw.items():
        setattr(spec, k, v)
    return spec


def _second(**kw: Any) -> InvSpec:
    spec = InvSpec(top_symbols=BASE_SYMBOLS)
    for k, v in kw.items():
        setattr(spec, k, v)
    return spec


def _events(spec: InvSpec) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"event": "start", "version": 1}]
    if spec.hash_calls:
        events.append({"event": "digest", "sha256": SOURCE_SHA, "size": SIZE})
    for answer in spec.have_answers:
        events.append({"event": "have", "answer": answer})
    for attempt in range(1, spec.attempts + 1):
        events.append({"event": "upload", "attempt": attempt})
    if spec.completion is not None:
        events.append(spec.completion)
    return events


def _invocation(
    name: str, index: int, collector: str, spec: InvSpec, ports: tuple[int, int]
) -> Invocation:
    mult_wall, mult_cpu, startup = TRACER_COST[collector]
    receiver_addr = f"127.0.0.1:{ports[0]}"
    decoy_addr = f"127.0.0.1:{ports[1]}"
    destinations = ([receiver_addr] if spec.connections else []) + (
        [decoy_addr] if spec.decoy else []
    )
    connects = spec.connections + spec.decoy
    puts = max(spec.attempts, 0)
    sent = HAVE_LINE * len(spec.have_answers) + PUT_LINE * puts + spec.payload
    observed = Observed(
        packets=PacketSummary(
            packets=0 if connects == 0 else 10 * connects + 4 * (spec.payload // 65_536),
            received_by_filter=0 if connects == 0 else 10 * connects + 4 * (spec.payload // 65_536),
            dropped_by_kernel=0,
            dropped_by_interface=0,
            payload_bytes_to_receiver=sent,
            payload_bytes_to_decoy=18 * spec.decoy,
            payload_bytes_from_receiver=3 * len(spec.have_answers) + 3 * puts,
            destinations=tuple(sorted(destinations)),
        )
    )
    artifacts = {"packets": [f"{name}/r1/{collector}/capture.pcap"]}
    if collector == "strace":
        observed.strace = StraceSummary(
            source_bytes_read=spec.source_bytes,
            source_reads=spec.hash_calls * (SIZE // 65_536 + 1),
            connects=connects,
            destinations=tuple(sorted(destinations)),
            sent_bytes=sent + 18 * spec.decoy,
            syscalls=96 + 9 * spec.hash_calls * (SIZE // 65_536 + 1) + 11 * connects,
            exit_status=spec.exit_status,
        )
        artifacts["strace"] = [f"{name}/r1/strace/inv{index}/strace.txt"]
    elif collector == "bpftrace":
        read_bytes = spec.source_bytes + OTHER_READS
        sent_bytes = sent + 18 * spec.decoy
        maps = {
            "@connects": str(connects),
            "@hash_calls": str(spec.hash_calls),
            "@read_bytes": str(read_bytes),
            "@sent_bytes": str(sent_bytes),
            "@switches_out": str(spec.switches_out),
        }
        if spec.busy_wait_calls:
            maps["@busy_wait_calls"] = str(spec.busy_wait_calls)
        observed.bpftrace = BpftraceSummary(
            hash_calls=spec.hash_calls,
            send_payload_calls=puts,
            busy_wait_calls=spec.busy_wait_calls,
            connects=connects,
            read_bytes=read_bytes,
            sent_bytes=sent_bytes,
            switches_out=spec.switches_out,
            destinations=tuple(sorted(destinations)),
            maps=maps,
        )
        artifacts["bpftrace"] = [f"{name}/r1/bpftrace/inv{index}/bpftrace.txt"]
    elif collector == "perf":
        observed.perf = PerfSummary(
            event="cpu-clock",
            event_reason=PERF_REASON,
            samples=spec.perf_samples,
            lost_samples=0,
            top_symbols=tuple(PerfSymbol.from_dict(s) for s in spec.top_symbols),
            top_client_symbol=spec.top_client_symbol,
        )
        artifacts["perf"] = [
            f"{name}/r1/perf/inv{index}/perf.data",
            f"{name}/r1/perf/inv{index}/perf-report.txt",
        ]
    claim = ClientClaim(
        exit_status=spec.exit_status,
        claimed_success=spec.exit_status == 0,
        completion=spec.completion,
        events=_events(spec),
        unparsed_lines=0,
        timed_out=False,
        killed_by_signal=None,
        wall_s=round(spec.wall_s * mult_wall + startup, 6),
        cpu_s=round(spec.cpu_s * mult_cpu, 6),
    )
    return Invocation(
        index=index,
        claim=claim,
        verifier=VerifierCheck(
            backup_exists=spec.backup_exists,
            matches_source=spec.backup_sha == SOURCE_SHA,
            backup_sha256=spec.backup_sha if spec.backup_exists else None,
            source_sha256=SOURCE_SHA,
            backup_size=SIZE if spec.backup_exists else None,
            checked_at=f"2026-11-29T16:0{index}:{10 + index:02d}.{ports[0] % 1000:03d}Z",
        ),
        receiver=ReceiverSummary(
            connections=spec.connections,
            payload_bytes_consumed=spec.payload,
            upload_attempts=spec.attempts,
            committed=spec.committed,
            rejected_uploads=spec.rejected,
            dropped_transfers=spec.dropped,
            have_queries=len(spec.have_answers),
            have_answers=list(spec.have_answers),
            held_source_at_start=spec.held,
            decisions=list(spec.decisions),
            protocol_errors=0,
        ),
        decoy=DecoySummary(
            connections=spec.decoy,
            peers=["127.0.0.1"] * min(spec.decoy, 1),
            bytes_received=18 * spec.decoy,
        ),
        observed=observed,
        artifacts=artifacts,
    )


@dataclass
class ScenarioSpec:
    name: str
    description: str
    invocations: tuple[InvSpec, InvSpec]
    #: clause -> (expected, observed, evidence, reason); unlisted clauses pass as expected
    verdicts: dict[str, tuple[Outcome, Outcome, list[str], str]]
    findings: list[tuple[str, int | None, str, Any, Any]]
    preload: str | None = None


DEFAULT_REASONS: dict[str, tuple[list[str], str]] = {
    "C1": (["verifier"], "The verifier found the saved backup's SHA-256 equal to the source's."),
    "C2": (["receiver", "packets"], "The receiver consumed no upload payload on invocation 2."),
    "C3": (
        ["strace", "bpftrace", "packets", "decoy"],
        "Every destination seen by strace, bpftrace and packets is the configured receiver.",
    ),
    "C4": (["receiver"], "No transfer was interrupted and the backup committed on attempt 1."),
    "C5": (["receiver"], "No upload failed its advertised digest; nothing was rejected."),
    "C6": (["client", "verifier"], "The client's claim agrees with the verified outcome."),
}


SPECS: list[ScenarioSpec] = [
    ScenarioSpec(
        "baseline",
        "Correct client: uploads once, recognises unchanged content on the second run.",
        (_first(), _second()),
        {},
        [
            ("receiver", 1, "connections", 2, 2),
            ("receiver", 2, "connections", 1, 1),
            ("receiver", 1, "payload_bytes_consumed", SIZE, SIZE),
            ("receiver", 2, "payload_bytes_consumed", 0, 0),
            ("bpftrace", 1, "connects", 2, 2),
            ("bpftrace", 2, "connects", 1, 1),
        ],
    ),
    ScenarioSpec(
        "false-success",
        "Prints a completion event and exits 0 without uploading anything.",
        (
            _second(
                connections=0,
                have_answers=[],
                held=False,
                backup_exists=False,
                backup_sha=None,
                hash_calls=0,
                source_bytes=0,
                switches_out=1,
                wall_s=0.0009,
                cpu_s=0.0007,
                perf_samples=3,
                top_symbols=_symbols(
                    ("_dl_relocate_object", "ld-linux-x86-64.so.2", 66.7, 66.7),
                    ("main", "backup-client", 33.3, 33.3),
                ),
                top_client_symbol="main",
            ),
            _second(
                connections=0,
                have_answers=[],
                held=False,
                backup_exists=False,
                backup_sha=None,
                hash_calls=0,
                source_bytes=0,
                switches_out=1,
                wall_s=0.0008,
                cpu_s=0.0006,
                perf_samples=2,
                top_symbols=_symbols(("_dl_relocate_object", "ld-linux-x86-64.so.2", 100.0, 100.0)),
                top_client_symbol="main",
            ),
        ),
        {
            "C1": ("fail", "fail", ["verifier"], "The verifier found no saved backup."),
            "C6": (
                "fail",
                "fail",
                ["client", "verifier"],
                "Both invocations exited 0 with status ok, but the verifier found no backup.",
            ),
            "C4": (
                "pass",
                "pass",
                ["receiver"],
                "No upload was attempted and none was interrupted.",
            ),
        },
        [
            ("verifier", 2, "backup_exists", False, False),
            ("bpftrace", 1, "connects", 0, 0),
            ("bpftrace", 2, "connects", 0, 0),
            ("packets", 1, "packets", 0, 0),
            ("packets", 2, "packets", 0, 0),
        ],
    ),
    ScenarioSpec(
        "hash-storm",
        "Hashes the whole source 256 times per invocation; the backup is still correct.",
        (
            _first(
                hash_calls=256,
                source_bytes=256 * SIZE,
                switches_out=5,
                wall_s=0.4163,
                cpu_s=0.4104,
                perf_samples=1641,
                top_symbols=STORM_SYMBOLS,
            ),
            _second(
                hash_calls=256,
                source_bytes=256 * SIZE,
                switches_out=4,
                wall_s=0.4121,
                cpu_s=0.4087,
                perf_samples=1633,
                top_symbols=STORM_SYMBOLS,
            ),
        ),
        {},
        [
            ("bpftrace", 1, "hash_calls", 256, 256),
            ("bpftrace", 2, "hash_calls", 256, 256),
            ("strace", 2, "source_bytes_read", 256 * SIZE, 256 * SIZE),
            ("receiver", 2, "payload_bytes_consumed", 0, 0),
            ("perf", 1, "top_client_symbol", "hash_file", "hash_file"),
        ],
    ),
    ScenarioSpec(
        "busy-spin",
        "Spins in busy_wait before deciding; the backup is still correct.",
        (
            _first(
                busy_wait_calls=1,
                wall_s=0.2658,
                cpu_s=0.2611,
                perf_samples=1046,
                top_symbols=SPIN_SYMBOLS,
                top_client_symbol="busy_wait",
                switches_out=9,
            ),
            _second(
                busy_wait_calls=1,
                wall_s=0.2617,
                cpu_s=0.2594,
                perf_samples=1037,
                top_symbols=SPIN_SYMBOLS,
                top_client_symbol="busy_wait",
                switches_out=8,
            ),
        ),
        {},
        [
            ("bpftrace", 1, "busy_wait_calls", 1, 1),
            ("perf", 1, "top_client_symbol", "busy_wait", "busy_wait"),
            ("perf", 2, "top_client_symbol", "busy_wait", "busy_wait"),
        ],
    ),
    ScenarioSpec(
        "unexpected-egress",
        "Connects to the decoy endpoint before performing the backup.",
        (_first(decoy=1, wall_s=0.0152), _second(decoy=1, wall_s=0.0121)),
        {
            "C3": (
                "fail",
                "fail",
                ["strace", "bpftrace", "packets", "decoy"],
                "strace and packets show a connection to the decoy address 127.0.0.1:40102; "
                "the decoy recorded it.",
            ),
        },
        [
            ("bpftrace", 1, "connects", 3, 3),
            ("bpftrace", 2, "connects", 2, 2),
            ("decoy", 1, "connections", 1, 1),
            ("decoy", 2, "connections", 1, 1),
            ("strace", 1, "destinations", "includes the decoy", "includes the decoy"),
        ],
    ),
    ScenarioSpec(
        "interrupted-transfer",
        "Baseline client; the receiver drops the first transfer after 65,536 payload bytes.",
        (
            _first(
                connections=3,
                payload=SIZE + 65_536,
                attempts=2,
                dropped=1,
                decisions=["dropped-by-fault", "committed"],
                wall_s=0.0213,
            ),
            _second(),
        ),
        {
            "C4": (
                "pass",
                "pass",
                ["receiver"],
                "The receiver dropped transfer 1 after 65,536 bytes and committed attempt 2 "
                "of at most 3.",
            ),
        },
        [
            ("receiver", 1, "payload_bytes_consumed", SIZE + 65_536, SIZE + 65_536),
            ("receiver", 1, "upload_attempts", 2, 2),
            ("receiver", 1, "dropped_transfers", 1, 1),
        ],
    ),
    ScenarioSpec(
        "corrupt-payload",
        "With an older backup saved, sends payloads that differ from their advertised digest.",
        (
            _first(
                exit_status=1,
                held=False,
                committed=False,
                rejected=1,
                decisions=["digest-mismatch"],
                backup_sha=OLDER_SHA,
                completion={
                    "event": "complete",
                    "status": "failed",
                    "reason": "receiver rejected upload: digest-mismatch",
                },
            ),
            _first(
                exit_status=1,
                held=False,
                committed=False,
                rejected=1,
                decisions=["digest-mismatch"],
                backup_sha=OLDER_SHA,
                completion={
                    "event": "complete",
                    "status": "failed",
                    "reason": "receiver rejected upload: digest-mismatch",
                },
            ),
        ),
        {
            "C1": (
                "fail",
                "fail",
                ["verifier"],
                "The saved backup is the older pre-loaded file, not the source.",
            ),
            "C5": (
                "pass",
                "pass",
                ["receiver", "verifier"],
                "The receiver rejected both uploads with digest-mismatch before commit; the "
                "older backup is untouched.",
            ),
            "C6": (
                "pass",
                "pass",
                ["client", "verifier"],
                "The client claimed failure (exit 1) and no matching backup exists.",
            ),
        },
        [
            ("receiver", 1, "rejected_uploads", 1, 1),
            ("receiver", 2, "rejected_uploads", 1, 1),
            (
                "verifier",
                2,
                "backup_sha256",
                "the pre-loaded older backup",
                "the pre-loaded older backup",
            ),
        ],
        preload=OLDER_SHA,
    ),
    ScenarioSpec(
        "redundant-upload",
        "Ignores the receiver's YES and re-uploads on the unchanged second run.",
        (
            _first(),
            _second(
                connections=2,
                payload=SIZE,
                attempts=1,
                committed=True,
                decisions=["committed"],
                wall_s=0.0139,
            ),
        ),
        {
            "C2": (
                "fail",
                "fail",
                ["receiver", "packets"],
                "The receiver answered YES yet consumed 524,288 payload bytes on invocation 2.",
            ),
        },
        [
            ("receiver", 2, "payload_bytes_consumed", SIZE, SIZE),
            ("receiver", 2, "have_answers", ["YES"], ["YES"]),
        ],
    ),
]


def _scenario(
    spec: ScenarioSpec,
    repetition: int,
    collectors: list[str],
    port_base: int,
    overrides: dict[str, tuple[Outcome, Outcome, list[str], str]] | None = None,
) -> ScenarioResult:
    passes: list[Pass] = []
    for n, collector in enumerate(collectors):
        ports = (port_base + 10 * n + 1, port_base + 10 * n + 2)
        passes.append(
            Pass(
                collector=collector,
                invocations=[
                    _invocation(spec.name, i + 1, collector, inv, ports)
                    for i, inv in enumerate(spec.invocations)
                ],
                receiver_address=f"127.0.0.1:{ports[0]}",
                decoy_address=f"127.0.0.1:{ports[1]}",
                preload_sha256=spec.preload,
            )
        )
    verdicts: dict[str, Verdict] = {}
    table = {**spec.verdicts, **(overrides or {})}
    for clause in CLAUSES:
        if clause in table:
            expected, observed, evidence, reason = table[clause]
        else:
            evidence, reason = DEFAULT_REASONS[clause]
            expected, observed = "pass", "pass"
        evidence = [
            e for e in evidence if e not in ("strace", "bpftrace", "perf") or e in collectors
        ]
        verdicts[clause] = Verdict(expected, observed, evidence, reason)
    findings = [
        Finding(obs, inv, key, exp, got, exp == got) for obs, inv, key, exp, got in spec.findings
    ]
    wall = sum(i.claim.wall_s for p in passes for i in p.invocations) + 0.35 * len(passes)
    return ScenarioResult(
        name=spec.name,
        repetition=repetition,
        description=spec.description,
        scenario_file=f"scenarios/{spec.name}.yaml",
        passes=passes,
        verdicts=verdicts,
        findings=findings,
        wall_s=round(wall, 6),
    )


def _observers(available: bool) -> dict[str, ObserverStatus]:
    if available:
        return {
            "strace": ObserverStatus(True, None, {"version": "6.1"}),
            "bpftrace": ObserverStatus(True, None, {"version": "v0.17.0", "btf": True}),
            "perf": ObserverStatus(True, None, {"event": "cpu-clock", "event_reason": PERF_REASON}),
            "packets": ObserverStatus(True, None, {"interface": "lo", "tool": "tcpdump 4.99.3"}),
        }
    return {
        "strace": ObserverStatus(False, "strace is not installed (Debian package strace)"),
        "bpftrace": ObserverStatus(
            False, "bpftrace needs CAP_BPF and CAP_PERFMON; the lab is not running as root"
        ),
        "perf": ObserverStatus(
            False, "kernel.perf_event_paranoid is 4: perf may not open events for this user"
        ),
        "packets": ObserverStatus(
            False, "tcpdump cannot open the loopback interface without CAP_NET_RAW"
        ),
    }


def _environment() -> dict[str, Any]:
    return {
        "git_commit": "3f9c2a7d41be0c58e2d97f16a3b4c5d6e7f80912",
        "image": {
            "reference": "execution-evidence-lab:0.1.0",
            "digest": "sha256:" + hashlib.sha256(b"lab image").hexdigest(),
        },
        "client_sha256": CLIENT_SHA,
        "kernel": "6.18.0-lab #1 SMP PREEMPT_DYNAMIC x86_64",
        "cpu_model": "AMD EPYC 7B13 64-Core Processor",
        "tool_versions": {
            "bpftrace": "v0.17.0",
            "cc": "gcc (Debian 12.2.0-14) 12.2.0",
            "openssl": "OpenSSL 3.0.15",
            "perf": "perf version 6.1.115",
            "python": "3.11.7",
            "strace": "strace -- version 6.1",
            "tcpdump": "tcpdump version 4.99.3",
        },
        "hostname": "reviewer-secret-hostname",
    }


def _run(scenarios: list[ScenarioResult], observers_available: bool, **options: Any) -> RunResult:
    run = RunResult(
        run_id="20261129T160000Z-ab12cd",
        started_at="2026-11-29T16:00:00Z",
        finished_at="2026-11-29T16:07:42Z",
        options={
            "collector": "all" if observers_available else "none",
            "packets": "best-effort",
            "repetitions": 1,
            "source_size": SIZE,
            "seed": 1,
            "client": "/work/main/native/build/backup-client",
            **options,
        },
        observers=_observers(observers_available),
        environment=_environment(),
        scenarios=scenarios,
        signing={
            "key_id": "0EACA16E1E65E953",
            "fingerprint": "3b0d3b5e1c1fb2c4a1e0d3a7e5f0c2b9d8a6f4e2c0b1a3d5e7f9081726354453",
            "ephemeral": True,
        },
    )
    run.aggregate = aggregate(scenarios)
    return run


def build_sample_run() -> RunResult:
    collectors = ["none", "strace", "bpftrace", "perf"]
    scenarios = [_scenario(spec, 1, collectors, 40_000 + 100 * n) for n, spec in enumerate(SPECS)]
    return _run(scenarios, True)


def build_degraded_run() -> RunResult:
    """A machine where no tracer and no packet capture is available: only the untraced pass
    ran, so those observers are absent and C3 cannot be established."""
    scenarios: list[ScenarioResult] = []
    for n, spec in enumerate(SPECS):
        s = _scenario(spec, 1, ["none"], 40_000 + 100 * n)
        for p in s.passes:
            for inv in p.invocations:
                inv.observed = Observed()
                inv.artifacts.clear()
                for name, status in _observers(False).items():
                    inv.missing[name] = status.reason or ""
        c3 = s.verdicts["C3"]
        s.verdicts["C3"] = Verdict(
            c3.expected,
            "not-observed",
            ["decoy"],
            "No syscall trace, eBPF or packet capture ran; the decoy's records alone cannot "
            "rule out other destinations.",
        )
        s.findings = [
            f
            if f.observer in ("receiver", "decoy", "verifier")
            else Finding(
                f.observer,
                f.invocation,
                f.key,
                f.expected,
                None,
                None,
                f"{f.observer} unavailable: {_observers(False)[f.observer].reason}",
            )
            for f in s.findings
        ]
        scenarios.append(s)
    run = _run(scenarios, False)
    run.environment["image"] = None
    run.signing = {}
    return run


def build_repeated_run() -> RunResult:
    """baseline x3 (repetition 2 sees an unexpected DNS destination), hash-storm x2
    (repetition 2's bpftrace pass failed), false-success x1, and a candidate evaluation."""
    collectors = ["none", "strace", "bpftrace", "perf"]
    by_name = {s.name: s for s in SPECS}
    scenarios: list[ScenarioResult] = []
    for rep in (1, 2, 3):
        overrides: dict[str, tuple[Outcome, Outcome, list[str], str]] | None = None
        if rep == 2:
            overrides = {
                "C3": (
                    "pass",
                    "fail",
                    ["strace", "packets"],
                    "strace shows a sendto to 127.0.0.53:53 (the host's DNS stub resolver) "
                    "before the receiver connection.",
                )
            }
        scenarios.append(
            _scenario(by_name["baseline"], rep, collectors, 41_000 + 100 * rep, overrides)
        )
    for rep in (1, 2):
        s = _scenario(by_name["hash-storm"], rep, collectors, 42_000 + 100 * rep)
        if rep == 2:
            failed = next(p for p in s.passes if p.collector == "bpftrace")
            failed.error = "bpftrace exited 1: ERROR: Could not resolve symbol: hash_file"
            for inv in failed.invocations:
                inv.observed.bpftrace = None
                inv.missing["bpftrace"] = failed.error
            s.findings = [
                Finding(f.observer, f.invocation, f.key, f.expected, None, None, failed.error)
                if f.observer == "bpftrace"
                else f
                for f in s.findings
            ]
        scenarios.append(s)
    scenarios.append(_scenario(by_name["false-success"], 1, collectors, 43_100))
    run = _run(scenarios, True, repetitions=3)
    run.evaluation = Evaluation.from_dict(SAMPLE_EVALUATION)
    return run


#: a candidate evaluation as results.json records it (read back by Evaluation.from_dict)
SAMPLE_EVALUATION: dict[str, Any] = {
    "evaluation_id": "eval-5c1d07a9e2b4f613",
    "lab_version": "0.1.0",
    "status": "fail",
    "status_reason": "clause(s) C2 did not pass in every repetition",
    "repetitions": 5,
    "files": {
        "docs/client-contract.md": hashlib.sha256(b"contract").hexdigest(),
        "lab/judge/contract.py": hashlib.sha256(b"contract.py").hexdigest(),
        "scenarios/candidate/contract.yaml": hashlib.sha256(b"conditions").hexdigest(),
    },
    "fixture": {"generator": "shake_256 lab-fixture-v1", "size": SIZE},
    "limits": {"invocation_timeout_s": 60.0, "build_timeout_s": 300.0, "timing_runs": 20},
    "candidate": {
        "kind": "patch",
        "input_name": "agent.patch",
        "input_sha256": hashlib.sha256(b"candidate patch").hexdigest(),
        "binary_sha256": hashlib.sha256(b"candidate binary").hexdigest(),
        "build": {
            "status": "built",
            "patch_exit_status": 0,
            "patch_applied_in": "repository root",
            "exit_status": 0,
            "timed_out": False,
            "duration_s": 2.41,
            "log": "candidate/build.log",
            "stderr": "candidate/build.err",
        },
    },
    "instrument_check": {
        "scenarios": ["false-success", "unexpected-egress"],
        "caught": {
            "false-success": {"C1": "fail", "C6": "fail"},
            "unexpected-egress": {"C3": "fail"},
        },
        "ok": True,
    },
    "clauses": {
        c: {
            "pass": 4 if c == "C2" else 3 if c == "C5" else 5,
            "fail": 1 if c == "C2" else 0,
            "not-observed": 0,
            # C5's situation (a mismatching payload) arose in 3 of the 5 repetitions
            "not-exercised": 2 if c == "C5" else 0,
            "total": 5,
        }
        for c in CLAUSES
    },
    "diagnostics": [
        {
            "condition": "contract",
            "repetition": 1,
            "invocation": 1,
            "source_bytes_read": SIZE,
            "read_ratio": 1.0,
            "hash_file_calls": 1,
            "cpu_s_untraced": 0.0091,
            "missing": [],
        },
        {
            "condition": "contract",
            "repetition": 1,
            "invocation": 2,
            "source_bytes_read": None,
            "read_ratio": None,
            "hash_file_calls": 1,
            "cpu_s_untraced": 0.0083,
            "missing": ["strace"],
        },
    ],
    "timing": {
        "rounds": 20,
        "size": SIZE,
        "method": "untraced; clients alternated; each round = first backup into an empty "
        "receiver + unchanged second invocation; wall = spawn to reap, cpu = user+sys rusage",
        "clients": {
            "baseline": {
                "first_backup_wall": {"median": 0.0141, "min": 0.0132, "max": 0.0188, "n": 20},
                "first_backup_cpu": {"median": 0.0102, "min": 0.0097, "max": 0.0121, "n": 20},
                "unchanged_wall": {"median": 0.0112, "min": 0.0104, "max": 0.0139, "n": 12},
                "unchanged_cpu": {"median": 0.0088, "min": 0.0083, "max": 0.0097, "n": 12},
                "nonzero_exits": 0,
            },
            "candidate": {
                "first_backup_wall": {"median": 0.0117, "min": 0.0109, "max": 0.0151, "n": 20},
                "first_backup_cpu": {"median": 0.0081, "min": 0.0078, "max": 0.0094, "n": 20},
                "unchanged_wall": {"median": 0.0031, "min": 0.0028, "max": 0.0046, "n": 12},
                "unchanged_cpu": None,
                "nonzero_exits": 0,
            },
        },
        "ratio": {
            "first_backup_wall": 0.8298,
            "first_backup_cpu": 0.7941,
            "unchanged_wall": 0.2768,
            "unchanged_cpu": None,
        },
        "ratio_interval": {
            "first_backup_wall": [0.7712, 0.8907],
            "first_backup_cpu": [0.7501, 0.8420],
            "unchanged_wall": [0.2460, 0.3102],
            "unchanged_cpu": None,
        },
        "interval_method": "paired percentile bootstrap over the alternated rounds (test)",
        # the 8 rounds after the least 12 timed the first backup alone (lean later rounds)
        "rounds_rule": {
            "min_rounds": 12,
            "max_rounds": 36,
            "target_half_width": 0.05,
            "metrics": ["first_backup_wall"],
            "stopped": "target",
            "half_widths": {"first_backup_wall": 0.0359},
            "later_rounds": {"baseline": ["first_backup"], "candidate": ["first_backup"]},
        },
    },
    "workspace": "/tmp/lab-candidate-xyz/native",
}


if __name__ == "__main__":
    json.dump(build_sample_run().to_dict(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
