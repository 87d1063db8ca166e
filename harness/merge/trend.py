"""trend.html (`harness runs --trend FIGURE`): one figure of many runs against the time each
started, a line for each run name, so that a nightly job's history shows where it moved; a
table of the points below. Self-contained, as report.html is: inline SVG, no script."""

from __future__ import annotations

import html
import time
from typing import Any

from harness.errors import BadInput
from harness.merge.report import STYLE, _table, chart
from harness.units import format_us

# The figures a trend can draw: the index's (harness.rundir.index.RunEntry) own, each with
# its axis label and how a value reads.
FIGURES: dict[str, tuple[str, Any]] = {
    "rate": ("msgs/s sent (the producers', summed)", lambda v: f"{v:,.1f}"),
    "p99": ("p99 latency, ms (the highest of the run's groups)", lambda v: format_us(v * 1000)),
    "lost": ("messages lost", lambda v: f"{v:,.0f}"),
}
FIELDS = {"rate": "rate", "p99": "p99_us", "lost": "lost"}


def figure_of(text: str) -> str:
    if text not in FIGURES:
        raise BadInput("--trend", f"{text!r}: one of {', '.join(FIGURES)}")
    return text


def render_trend(rows: list[dict[str, Any]], figure: str, title: str) -> str:
    """rows: `harness runs`' rows (RunEntry.row()), any order."""
    label, reads = FIGURES[figure]
    field = FIELDS[figure]
    points = sorted((r for r in rows if r["start_s"] and r[field] is not None),
                    key=lambda r: r["start_s"])
    if not points:
        raise BadInput("--trend", f"no run under the filters has a start and a {figure}")
    first = points[0]["start_s"]
    series: dict[str, list[list[float]]] = {}
    for row in points:
        value = row[field] / 1000 if figure == "p99" else row[field]
        series.setdefault(row["name"] or "(no name)", []).append(
            [row["start_s"] - first, value])
    span = max(points[-1]["start_s"] - first, 1.0)
    when = "%Y-%m-%d %H:%M" if span < 3 * 86400 else "%Y-%m-%d"
    ticks = [(span * i / 5, time.strftime(when, time.localtime(first + span * i / 5)))
             for i in range(6)]
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>{len(points)} run(s), {html.escape(points[0]['start'])} to "
             f"{html.escape(points[-1]['start'])}: {html.escape(label)}, a line for each run "
             "name.</p>",
             chart(f"{figure} by run start", series, label.split(" (")[0],
                   y_format=(lambda v: format_us(v * 1000)) if figure == "p99" else
                   (lambda v: f"{v:,.0f}"), x_ticks=ticks, x_label="run start"),
             _table(["start", "name", "modules", "status", figure, "path"],
                    [[r["start"], r["name"], ", ".join(r["modules"]), r["status"],
                      reads(r[field] / 1000 if figure == "p99" else r[field]), r["path"]]
                     for r in points])]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            + "".join(parts) + "</body></html>\n")
