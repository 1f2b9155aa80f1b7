"""The perf collector's parsers, on perf 6.1 output captured on this lab's machine.

Fixtures (tests/assets/perf/<case>/): ``perf-report.txt`` is
``perf report --children --stdio --sort symbol,dso`` and ``perf-stats.txt`` is
``perf report --stats``, both verbatim, with their stderr beside them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.collectors.perf import (
    EventChoice,
    PerfCollector,
    PerfParseError,
    SymbolRow,
    annotated_symbol,
    choose_event,
    paranoid_blocks,
    parse_report,
    parse_stats,
    summarize,
    top_client_symbol,
)

CPU_CLOCK = EventChoice("cpu-clock", "cpu-clock", ("-F", "999"), "test: software event")


def _case(assets: Path, name: str) -> tuple[str, str, str]:
    base = assets / "perf" / name
    return (
        (base / "perf-report.txt").read_text(),
        (base / "perf-stats.txt").read_text(),
        (base / "perf-report.stderr.txt").read_text(),
    )


def test_total_lost_samples_is_not_the_sample_count(assets: Path) -> None:
    # The seed article's bug: a grep for "Samples" matched "# Total Lost Samples: N" and
    # reported N as the sample count. Here N = 206 and the real count is 9946.
    report_text, stats_text, stderr = _case(assets, "lost-samples")
    assert "# Total Lost Samples: 206" in report_text
    report = parse_report(report_text)
    assert report.lost_samples == 206
    assert [s.event for s in report.sections] == ["cpu-clock"]
    section = report.sections[0]
    # perf abbreviates the header count: "9K" is approximate, never taken as exact.
    assert (section.samples_text, section.samples, section.samples_exact) == ("9K", 9000, False)
    assert section.event_count == 994600000
    summary = summarize(report_text, stats_text, CPU_CLOCK, ["busy_wait"], stderr).to_dict()
    assert summary["samples"] == 9946
    assert summary["lost_samples"] == 206
    assert summary["lost_chunks"] == 27


def test_stats_distinguishes_lost_sample_records_from_lost_samples(assets: Path) -> None:
    _, stats_text, _ = _case(assets, "lost-samples")
    stats = parse_stats(stats_text, "cpu-clock")
    # Aggregated table: one LOST_SAMPLES *record*; per-event table: 206 lost *samples*.
    assert stats.lost_sample_records == 1
    assert stats.lost_samples == 206
    assert stats.samples == 9946
    assert stats.total_events == 15736


def test_busy_wait_program(assets: Path) -> None:
    report_text, stats_text, stderr = _case(assets, "busy-wait")
    summary = summarize(report_text, stats_text, CPU_CLOCK, ["busy_wait"], stderr).to_dict()
    assert summary["event"] == "cpu-clock"
    assert summary["event_reason"] == "test: software event"
    assert summary["samples"] == 421
    assert summary["lost_samples"] == 0
    assert summary["event_count"] == 421421421
    # main and _start have 100% inclusive weight but are entry points.
    assert summary["top_client_symbol"] == "busy_wait"
    top = summary["top_symbols"]
    # Equal weights are ordered by name, so the list is deterministic.
    assert [r["symbol"] for r in top if r["inclusive_pct"] == 100.0] == [
        "__libc_start_call_main",
        "__libc_start_main_impl (inlined)",
        "_start",
        "main",
    ]
    assert {"symbol": "_start", "dso": "busy_wait", "inclusive_pct": 100.0, "self_pct": 0.0} in top
    # A symbol holding a space is one symbol, and the dso column is read after it.
    assert {"symbol": "__libc_start_main_impl (inlined)", "dso": "libc.so.6"}.items() <= next(
        r for r in top if r["symbol"].startswith("__libc_start_main_impl")
    ).items()
    busy = next(r for r in top if r["symbol"] == "busy_wait")
    assert (busy["inclusive_pct"], busy["self_pct"]) == (94.54, 94.06)
    assert [r["inclusive_pct"] for r in top] == sorted(
        (r["inclusive_pct"] for r in top), reverse=True
    )


def test_call_graph_lines_are_not_entries(assets: Path) -> None:
    report_text, _, _ = _case(assets, "busy-wait")
    rows = parse_report(report_text).rows
    # Nine top-level entries; the "--94.54%--busy_wait" call-graph lines are not rows.
    assert len(rows) == 9
    assert sum(1 for r in rows if r.symbol == "busy_wait") == 1
    assert {r.level for r in rows} == {".", "k"}


def test_native_client_busy_spin(assets: Path) -> None:
    report_text, stats_text, stderr = _case(assets, "native-busy-spin")
    summary = summarize(report_text, stats_text, CPU_CLOCK, ["backup-client"], stderr).to_dict()
    assert summary["samples"] == 302
    # "monotonic_ns (inlined)" is a client frame too, but busy_wait contains it.
    assert summary["top_client_symbol"] == "busy_wait"


def test_native_client_hash_storm(assets: Path) -> None:
    report_text, stats_text, stderr = _case(assets, "native-hash-storm")
    summary = summarize(report_text, stats_text, CPU_CLOCK, ["backup-client"], stderr).to_dict()
    assert summary["top_client_symbol"] == "hash_file"
    assert len(summary["top_symbols"]) == 15


def test_annotate_only_a_symbol_with_self_samples(assets: Path) -> None:
    # busy_wait burns its own samples: perf annotate has instructions to show
    spin = _case(assets, "native-busy-spin")[0]
    assert annotated_symbol(spin, "busy_wait", ["backup-client"]) == "busy_wait"
    # hash_file's weight is all in libcrypto: perf annotate would say "has no samples"
    storm = _case(assets, "native-hash-storm")[0]
    assert annotated_symbol(storm, "hash_file", ["backup-client"]) is None
    assert annotated_symbol(storm, None, ["backup-client"]) is None
    assert annotated_symbol(spin, "busy_wait", ["other-client"]) is None


def test_wrong_client_name_finds_no_client_symbol(assets: Path) -> None:
    report_text, stats_text, stderr = _case(assets, "native-hash-storm")
    summary = summarize(report_text, stats_text, CPU_CLOCK, ["other-client"], stderr).to_dict()
    assert summary["top_client_symbol"] is None


def test_truncated_perf_data_is_an_error(assets: Path) -> None:
    report_text, stats_text, stderr = _case(assets, "truncated")
    assert "failed to process sample" in stderr
    with pytest.raises(PerfParseError, match="no '# Samples' header"):
        summarize(report_text, stats_text, CPU_CLOCK, ["busy_wait"], stderr)


def test_no_samples_is_a_real_zero(assets: Path) -> None:
    report_text, stats_text, stderr = _case(assets, "no-samples")
    summary = summarize(report_text, stats_text, CPU_CLOCK, ["true"], stderr).to_dict()
    assert summary["samples"] == 0
    assert summary["lost_samples"] == 0
    assert summary["top_symbols"] == []
    assert summary["top_client_symbol"] is None


def test_event_mismatch_is_an_error(assets: Path) -> None:
    report_text, stats_text, stderr = _case(assets, "busy-wait")
    ibs = EventChoice("ibs_op", "ibs_op//", ("-c", "100000"), "test")
    with pytest.raises(PerfParseError, match="not of 'ibs_op//'"):
        summarize(report_text, stats_text, ibs, ["busy_wait"], stderr)


def test_stats_and_header_disagreeing_is_an_error(assets: Path) -> None:
    report_text, stats_text, stderr = _case(assets, "busy-wait")
    tampered = stats_text.replace("SAMPLE events:        421", "SAMPLE events:        420")
    assert tampered != stats_text
    with pytest.raises(PerfParseError, match="421 samples but perf report --stats counts 420"):
        summarize(report_text, tampered, CPU_CLOCK, ["busy_wait"], stderr)


def test_ibs_header_line() -> None:
    text = (
        "# Total Lost Samples: 0\n"
        "#\n"
        "# Samples: 233  of event 'ibs_op//'\n"
        "# Event count (approx.): 23300000\n"
    )
    report = parse_report(text)
    assert report.lost_samples == 0
    section = report.sections[0]
    assert (section.event, section.samples, section.samples_exact) == ("ibs_op//", 233, True)
    assert section.event_count == 23300000


def test_tie_goes_to_the_callee_with_self_weight() -> None:
    rows = [
        SymbolRow("main", "client", 99.8, 0.0, "."),
        SymbolRow("decide", "client", 99.8, 0.0, "."),
        SymbolRow("busy_wait", "client", 99.8, 99.6, "."),
        SymbolRow("__vdso_clock_gettime", "[vdso]", 99.9, 0.2, "."),
        SymbolRow("do_syscall_64", "client", 100.0, 0.0, "k"),
    ]
    assert top_client_symbol(rows, ["client"]) == "busy_wait"
    assert top_client_symbol(rows[:2], ["client"]) == "decide"
    assert top_client_symbol(rows[:1], ["client"]) is None


def test_event_choice(tmp_path: Path) -> None:
    absent = choose_event(tmp_path / "ibs_op", "6.18.44")
    assert absent.event == "cpu-clock"
    assert absent.perf_event == "cpu-clock"
    assert "ibs_op is not exposed by this CPU/kernel" in absent.reason
    assert "using the software cpu-clock event" in absent.reason
    device = tmp_path / "ibs_op"
    device.mkdir()
    present = choose_event(device, "6.18.44")
    assert (present.event, present.perf_event) == ("ibs_op", "ibs_op//")
    assert present.sampling == ("-c", "100000")
    old = choose_event(device, "5.15.0-91-generic")
    assert old.event == "cpu-clock"
    assert "predates per-process IBS sampling" in old.reason


def test_paranoid_rules() -> None:
    assert not paranoid_blocks(2, privileged=False)
    assert paranoid_blocks(3, privileged=False)
    assert not paranoid_blocks(4, privileged=True)
    assert not paranoid_blocks(None, privileged=False)


def test_probe_names_the_package_when_perf_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    status = PerfCollector.probe()
    assert not status.available
    assert status.reason is not None
    assert "perf is not installed" in status.reason
    assert "install the Debian package 'linux-perf'" in status.reason


def test_wrap_runs_the_client_under_perf_record(tmp_path: Path) -> None:
    from lab.collectors.base import InvocationContext
    from lab.host.procs import CommandLog
    from tests.conftest import require

    perf = __import__("shutil").which("perf")
    require("perf", perf is not None, "perf is not installed (wrap() resolves its path)")
    ctx = InvocationContext(
        run_dir=tmp_path,
        out_dir=tmp_path,
        client_path=tmp_path / "client",
        source_path=tmp_path / "source.bin",
        source_size=0,
        receiver_port=1,
        decoy_port=2,
        invocation=1,
        log=CommandLog(tmp_path / "commands.jsonl"),
    )
    argv = PerfCollector(choice=CPU_CLOCK).wrap(["/bin/client", "--source", "x"], ctx)
    assert argv[1] == "record"
    assert argv[argv.index("-e") + 1] == "cpu-clock"
    assert argv[argv.index("--call-graph") + 1] == "dwarf"
    # without it, perf's BPF side-band thread keeps every record open ~1 s after the client
    assert "--no-bpf-event" in argv[: argv.index("--")]
    assert argv[argv.index("-o") + 1] == str(tmp_path / "perf.data")
    assert argv[argv.index("--") + 1 :] == ["/bin/client", "--source", "x"]
