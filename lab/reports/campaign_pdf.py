"""The PDF's "Agent campaign" section: the rows of :mod:`lab.reports.campaign` drawn with
the PDF's blocks (kept apart so that ``lab.reports.pdf`` stays one sitting long).

    story += campaign_flow(run.campaign)
"""

from __future__ import annotations

from reportlab.platypus import CondPageBreak, Flowable

from lab.model.campaign import CampaignRecord
from lab.reports.campaign import (
    CAMPAIGN_EXIT_STATEMENT,
    campaign_headline,
    campaign_sections,
    identity_rows,
)
from lab.reports.pdf_blocks import WIDTH, heading, pairs, para, table_flow
from lab.reports.table import Table

#: column widths of the repetitions table (rep, outcome, clauses, time, exit, patch, digest,
#: timing, why)
_REPETITION_WIDTHS = [24, 62, 50, 46, 34, 52, 70, 48]


def campaign_flow(record: CampaignRecord) -> list[Flowable]:
    flow: list[Flowable] = [CondPageBreak(200), heading("Agent campaign", 0)]
    flow += [para(campaign_headline(record), "strong"), para(CAMPAIGN_EXIT_STATEMENT, "box")]
    flow += pairs(identity_rows(record))
    for title, content in campaign_sections(record):
        flow.append(heading(title, 1))
        if isinstance(content, Table):
            widths = None
            if title == "Repetitions":
                widths = [*_REPETITION_WIDTHS, WIDTH - sum(_REPETITION_WIDTHS)]
            flow += table_flow(content, widths)
        else:
            flow += [para(f"• {sentence}", "body") for sentence in content]
    return flow
