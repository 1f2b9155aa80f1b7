"""reportlab's settings, made once before any of its graphics modules is imported.

``shapeChecking`` off: reportlab then checks no attribute set on a chart's shapes (a
development aid that validates every assignment, 24,000 of them in a default run's
report, about 5 % of its drawing). What is drawn is the same; a wrong value in a chart
surfaces when the chart is drawn (every chart is drawn by tests/unit/reports).
"""

from __future__ import annotations

from reportlab import rl_config

rl_config.shapeChecking = 0
