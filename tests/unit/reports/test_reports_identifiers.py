"""Ports and ids are identifiers, never quantities: "36481", not "36,481", in every view."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from lab.model import PacketSummary, RunResult
from lab.model.observed import PacketFlow
from lab.reports.html import render_html
from lab.reports.markdown import render_markdown
from lab.reports.table import fmt, fmt_field, is_identifier


def test_identifier_fields() -> None:
    assert fmt(36481) == "36,481"  # a quantity
    assert fmt_field("payload_bytes", 589824) == "589,824"
    for key in ("port", "receiver_port", "decoy ports", "pid", "evaluation id", "seed"):
        assert is_identifier(key), key
    assert fmt_field("receiver_port", 36481) == "36481"
    assert fmt_field("ports", [36481, 40123]) == "36481, 40123"
    assert not is_identifier("payload_bytes") and not is_identifier("report")


def _with_port(run: RunResult) -> RunResult:
    scenario = next(s for s in run.scenarios if s.name == "baseline")
    primary = scenario.primary
    assert primary is not None
    inv = primary.invocations[0]
    flow = PacketFlow(port=36481, role="receiver", direction="to", packets=7, payload_bytes=524288)
    inv.observed.packets = replace(
        inv.observed.packets or PacketSummary.from_dict({}), flows=(flow,)
    )
    return run


def test_every_view_prints_a_port_whole(sample_run: RunResult, tmp_path: Path) -> None:
    run = _with_port(sample_run)
    for text in (render_markdown(run, files=None), render_html(run, files=None)):
        assert "36481" in text
        assert "36,481" not in text
        assert "524,288" in text  # quantities keep their separators
