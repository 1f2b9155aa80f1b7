"""What the charts plot, and that drawing them lays out every label."""

from __future__ import annotations

import itertools

import pytest
from reportlab.graphics.shapes import Drawing, String

from lab.model import RunResult, ScenarioResult
from lab.reports import charts
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
    d = charts.draw(chart, 480)
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
    d = charts.draw(chart, 480)
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
    labels = _strings(charts.draw(chart, 300))
    assert "not observed" in labels and "3" in labels
