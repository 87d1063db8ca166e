"""trend.html (`harness runs --trend FIGURE`): one figure of many runs against the time each
started, a line for each run name, so that a nightly job's history shows where it moved; a
table of the points below. Self-contained, as report.html is: inline SVG, no script."""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from harness.errors import BadInput
from harness.merge.report import STYLE, _ms, _table, chart
from harness.units import format_us


class Figure(NamedTuple):
    field: str  # the index's (harness.rundir.index.RunEntry) field
    label: str  # the axis's
    scale: float  # the field's value times this is drawn
    reads: Callable[[float], str]  # a drawn value, as the axis shows it
    # The field's own value, as the table shows it: from the field, not the drawn value, so
    # that the page reads as `harness runs` does (6975us times 1e-3 is 6.9750000000000005 ms).
    cell: Callable[[float], str]


def _count(places: int) -> Callable[[float], str]:
    return lambda v: f"{v:,.{places}f}"


FIGURES = {
    "rate": Figure("rate", "msgs/s sent (the producers', summed)", 1.0, _count(1), _count(1)),
    "p99": Figure("p99_us", "p99 latency, ms (the highest of the run's groups)", 1e-3, _ms,
                  format_us),
    "lost": Figure("lost", "messages lost", 1.0, _count(0), _count(0)),
}


def figure_of(text: str) -> str:
    if text not in FIGURES:
        raise BadInput("--trend", f"{text!r}: one of {', '.join(FIGURES)}")
    return text


def render_trend(rows: list[dict[str, Any]], figure: str, title: str) -> str:
    """rows: `harness runs`' rows (RunEntry.row()), any order."""
    drawn = FIGURES[figure]
    points = sorted((r for r in rows if r["start_s"] and r[drawn.field] is not None),
                    key=lambda r: r["start_s"])
    if not points:
        raise BadInput("--trend", f"no run under the filters has a start and a {figure}")
    first = points[0]["start_s"]
    series: dict[str, list[list[float]]] = {}
    for row in points:
        series.setdefault(row["name"] or "(no name)", []).append(
            [row["start_s"] - first, row[drawn.field] * drawn.scale])
    span = max(points[-1]["start_s"] - first, 1.0)
    when = "%Y-%m-%d %H:%M" if span < 3 * 86400 else "%Y-%m-%d"
    ticks = [(span * i / 5, time.strftime(when, time.localtime(first + span * i / 5)))
             for i in range(6)]
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>{len(points)} run(s), {html.escape(points[0]['start'])} to "
             f"{html.escape(points[-1]['start'])}: {html.escape(drawn.label)}, a line for each run "
             "name.</p>",
             chart(f"{figure} by run start", series, drawn.label.split(" (")[0],
                   y_format=drawn.reads, x_ticks=ticks, x_label="run start"),
             _table(["start", "name", "modules", "status", figure, "path"],
                    [[r["start"], r["name"], ", ".join(r["modules"]), r["status"],
                      drawn.cell(r[drawn.field]), r["path"]]
                     for r in points])]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            + "".join(parts) + "</body></html>\n")
