"""What the charts plot, and that drawing them lays out every label."""

from __future__ import annotations

import itertools

import pytest
from reportlab.graphics.shapes import Drawing, String

from lab.model import PerfSummary, RunResult, ScenarioResult
from lab.model.observed import PerfSymbol
from lab.reports import charts, pdf_charts, symbols
from tests.unit.reports.reports_sample import SIZE


def _scenario(run: RunResult, name: str, repetition: int = 1) -> ScenarioResult:
    return next(s for s in run.scenarios if s.name == name and s.repetition == repetition)


def test_tracing_overhead_is_traced_over_untraced(sample_run: RunResult) -> None:
    s = _scenario(sample_run, "hash-storm")
    by = {o.collector: o for o in charts.tracing_overhead(s)}
    assert sorted(by) == ["bpftrace", "perf", "strace"]
    untraced = next(p for p in s.passes if p.collector == "none")
    traced = next(p for p in s.passes if p.collector == "strace")
    wall = sum(i.claim.wall_s for i in traced.invocations) / sum(
        i.claim.wall_s for i in untraced.invocations
    )
    cpu = sum(i.claim.cpu_s or 0 for i in traced.invocations) / sum(
        i.claim.cpu_s or 0 for i in untraced.invocations
    )
    assert by["strace"].wall_ratio == pytest.approx(wall)
    assert by["strace"].cpu_ratio == pytest.approx(cpu)
    assert by["strace"].wall_ratio is not None and by["strace"].wall_ratio > 1


def test_tracing_overhead_skips_failed_passes_and_needs_an_untraced_pass(
    repeated_run: RunResult, degraded_run: RunResult
) -> None:
    failed = _scenario(repeated_run, "hash-storm", 2)
    assert "bpftrace" not in {o.collector for o in charts.tracing_overhead(failed)}
    assert charts.tracing_overhead(_scenario(degraded_run, "baseline")) == []
    s = _scenario(repeated_run, "baseline")
    s.passes = [p for p in s.passes if p.collector != "none"]
    assert charts.tracing_overhead(s) == []


def test_overhead_cpu_ratio_is_undefined_without_cpu_time(sample_run: RunResult) -> None:
    s = _scenario(sample_run, "baseline")
    for inv in s.passes[1].invocations:
        inv.claim.cpu_s = None
    first = charts.tracing_overhead(s)[0]
    assert first.cpu_ratio is None and first.wall_ratio is not None


def test_source_bytes_chart_uses_strace_and_a_log_axis(sample_run: RunResult) -> None:
    chart = charts.source_bytes_chart(sample_run)
    assert chart is not None and chart.log
    values = dict(zip(chart.categories, chart.values, strict=True))
    assert values["hash-storm"] == [256 * SIZE, 256 * SIZE]
    assert values["false-success"] == [0, 0]


def test_charts_say_not_observed_instead_of_zero(degraded_run: RunResult) -> None:
    assert charts.source_bytes_chart(degraded_run) is None
    assert charts.overhead_charts(degraded_run) == []
    s = degraded_run.scenarios[0]
    assert charts.perf_symbols_chart(s, s.name) is None


def test_connections_and_payload_come_from_the_records(sample_run: RunResult) -> None:
    conns = charts.connections_chart(sample_run)
    payload = charts.payload_chart(sample_run)
    assert conns is not None and payload is not None
    c = dict(zip(conns.categories, conns.values, strict=True))
    assert c["baseline"] == [2, 0, 1, 0]
    assert c["unexpected-egress"] == [2, 1, 1, 1]
    p = dict(zip(payload.categories, payload.values, strict=True))
    assert p["interrupted-transfer"] == [589_824, 0]


def test_overhead_switches_to_log_when_ratios_span_decades(sample_run: RunResult) -> None:
    wall, cpu = charts.overhead_charts(sample_run)
    assert wall.log  # bpftrace's start-up dwarfs the untraced client
    assert not cpu.log


def _strings(d: Drawing) -> list[str]:
    return [c.text for c in d.contents if isinstance(c, String)]


def test_draw_labels_every_category_series_and_axis(sample_run: RunResult) -> None:
    chart = charts.source_bytes_chart(sample_run)
    assert chart is not None
    d = pdf_charts.draw(chart, 480)
    labels = _strings(d)
    assert chart.title in labels and chart.axis_label in labels
    for name in chart.categories:
        assert name in labels
    for series in chart.series:
        assert series.name in labels
    assert "134,217,728" in labels
    assert {"100k", "1M", "10M", "100M"} <= set(labels)


def test_draw_never_overlaps_category_labels(sample_run: RunResult) -> None:
    chart = charts.connections_chart(sample_run)
    assert chart is not None
    d = pdf_charts.draw(chart, 480)
    ys = sorted(c.y for c in d.contents if isinstance(c, String) and c.text in chart.categories)
    assert all(b - a >= 9 for a, b in itertools.pairwise(ys))


def test_draw_writes_not_observed_for_missing_values() -> None:
    chart = charts.BarChart(
        title="t",
        axis_label="x",
        categories=["a", "b"],
        series=[charts.Series("s", "#000000")],
        values=[[3.0], [None]],
    )
    labels = _strings(pdf_charts.draw(chart, 300))
    assert "not observed" in labels and "3" in labels


def _perf(*rows: tuple[str, str, float, float], top: str | None = "hash_file") -> PerfSummary:
    return PerfSummary(
        event="cpu-clock",
        event_reason="test",
        samples=100,
        lost_samples=0,
        top_symbols=tuple(PerfSymbol(*row) for row in rows),
        top_client_symbol=top,
    )


def test_unresolved_addresses_fold_into_one_row_per_dso() -> None:
    perf = _perf(
        ("SHA256_Update", "libcrypto.so.3", 80.65, 0.0),
        ("hash_file", "backup-client", 95.7, 0.0),
        ("0x000000000029dd4f", "libcrypto.so.3", 5.38, 5.38),
        ("0x000000000029dd63", "libcrypto.so.3", 4.3, 4.3),
        ("0x00007fdfe629dd4f", "libcrypto.so.3", 5.38, 0.0),  # the same address, absolute
        ("[unknown]", "libc.so.6", 2.0, 2.0),
        ("0x00007f0000001234", "libc.so.6", 1.0, 1.0),
        ("send_payload", "backup-client", 18.4, 0.0),
        ("_copy_to_iter", "[kernel.kallsyms]", 7.53, 7.53),
    )
    bars = symbols.symbol_bars(perf)
    assert [b.label for b in bars] == [
        "hash_file",
        "send_payload",
        "SHA256_Update (libcrypto.so.3)",
        "_copy_to_iter ([kernel.kallsyms])",
        "libcrypto.so.3, no symbols",
        "libc.so.6, no symbols",
    ]
    crypto = bars[4]
    # self: the samples in those addresses, summed; inclusive: the largest (chains overlap)
    assert crypto.self_pct == pytest.approx(9.68) and crypto.inclusive_pct == 5.38
    assert crypto.unresolved and not crypto.own
    assert bars[5].self_pct == 3.0
    assert [b.own for b in bars[:2]] == [True, True]


def test_the_client_dso_comes_from_the_record() -> None:
    """Without a top client symbol, the recorded client name (or main's DSO) says which
    functions are the client's own."""
    perf = _perf(("busy_wait", "spin", 97.9, 97.9), ("memcpy", "libc.so.6", 99.0, 1.0), top=None)
    assert [b.own for b in symbols.symbol_bars(perf)] == [False, False]
    assert symbols.symbol_bars(perf, client="spin")[0].label == "busy_wait"
    assert symbols.is_unresolved("0x7f3a") and symbols.is_unresolved("[unknown]")
    assert not symbols.is_unresolved("0x_not_hex") and not symbols.is_unresolved("main")


def test_cpu_chart_leads_with_the_client_and_keeps_the_folded_rows(sample_run: RunResult) -> None:
    s = _scenario(sample_run, "hash-storm")
    chart = charts.perf_symbols_chart(s, s.name, limit=5)
    assert chart is not None
    assert chart.categories[0] == "hash_file" and chart.bold_categories == 1
    assert chart.categories[-1] == "libcrypto.so.3, no symbols"
    assert len(chart.categories) == 5 and not any(c.startswith("0x") for c in chart.categories)
    inclusive, self_pct = chart.values[-1][:2]
    assert self_pct == pytest.approx(21.52) and inclusive == 5.38
    assert chart.notes and "report.md" in chart.notes[0]
