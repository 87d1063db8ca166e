"""A sweep's results table in the WMB report's shape (Msg Size, Persistent, Message Rate,
% CPU, CPU ms/msg), with latency, loss and the backlog trend beside it; printed, and written
as CSV and Markdown."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.table import Table

from harness.modules.interface.roles import ROLES
from harness.plan.run import RunSpec
from harness.plan.topology import is_consumer
from harness.stats.backlog import Backlog
from harness.stats.figures import run_loss, us_per_message
from harness.stats.views import IntervalView

# The backlog grows if it rises faster than this share of the delivered rate (and at least
# one message a second) over the measured phase.
GROWING_SHARE = 0.02


def size_label(size: int) -> str:
    for unit, factor in (("M", 1024 * 1024), ("K", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (time, value) points; 0 for fewer than two."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var if var else 0.0


def backlog_trend(run: RunSpec, views: Iterable[IntervalView]) -> dict[str, Any]:
    """The backlog (harness.stats.backlog) interval by interval over the measured phase, and
    its slope (msgs/s) by least squares. One pass over the views, which may be read as they
    come."""
    consumers = [g.name for g in run.groups if is_consumer(g.role)]
    backlog = Backlog(run)
    points, delivered, seconds = [], 0, 0.0
    for view in views:
        value = backlog.after(view)
        if view.phase == "measure":
            points.append((view.start + view.length, value))
            seconds += view.length
            delivered += sum(view.groups[name].counters["received"] for name in consumers
                             if name in view.groups)
    if len(points) < 2:
        return {"slope": 0.0, "final": backlog.value, "stable": True, "checked": False}
    rise = slope(points)
    limit = max(GROWING_SHARE * delivered / (seconds or 1.0), 1.0)
    return {"slope": rise, "final": backlog.value, "stable": rise <= limit, "checked": True}


def row(run: RunSpec, summary: dict[str, Any], views: Iterable[IntervalView], rate: str,
        latency: str | None, labels: dict[str, Any]) -> dict[str, Any]:
    """One line of the table for one run."""
    producers = [g for g in run.groups if ROLES[g.role].produces]
    first = producers[0] if producers else run.groups[0]
    if rate in summary["groups"]:
        message_rate = summary["groups"][rate]["rate"]
    else:
        message_rate = summary["throughput"][rate.replace("-", "_")]
    lat_group = latency or next((g.name for g in run.groups if ROLES[g.role].consumes),
                                run.groups[0].name)
    lat = summary["groups"][lat_group]
    head = lat[lat["headline"]]
    broker = summary.get("broker_cpu") or {}
    lost = run_loss(run, summary)
    duplicated = sum(g["duplicated"] for g in summary["groups"].values())
    trend = backlog_trend(run, views)
    out: dict[str, Any] = {k.removeprefix("groups."): v for k, v in labels.items()}
    out.update({
        "Msg Size": size_label(first.size), "Persistent": "yes" if first.persistent else "no",
        "Message Rate (msgs/s)": round(message_rate, 1),
        "client % CPU": round(summary["client_cpu"]["max"], 1),
        # Every client process's CPU over the row's message rate.
        "client CPU us/msg": _round(us_per_message(summary["client_cpu"].get("cores", 0) * 1e6,
                                                   message_rate), 1),
        "broker % CPU": round(broker["mean"], 1) if broker else None,
        "broker CPU ms/msg received": round(broker["cpu_ms_per_received_msg"], 4)
        if broker and broker.get("cpu_ms_per_received_msg") is not None else None,
        f"{lat['headline']} p50 ms": _ms(head["p50"]), f"{lat['headline']} p99 ms":
        _ms(head["p99"]),
        # No rate set: no intended send times; not comparable with a paced row's latency.
        "closed loop": "yes" if lat.get("closed_loop") else "no",
        # The harness's own floor under this load: latency below it is not resolved.
        "floor p50 ms": _ms((summary.get("floor") or {}).get("p50")),
        "lost": lost, "duplicated": duplicated,
        "backlog": ("growing" if not trend["stable"] else "stable") if trend["checked"]
        else "-",
        # Messages sent and not received when the producers stopped (the backlog's last).
        "backlog at end": trend["final"],
        # The ActiveMQ paper's rule: above 75% a client may be what limits the rate.
        "client-bound": "yes" if summary["client_cpu"]["bottleneck"] else "no",
    })
    return out


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _ms(value: int | None) -> float | None:
    return None if value is None else round(value / 1000, 3)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def columns(rows: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for r in rows:
        out += [k for k in r if k not in out]
    return out


def table(rows: list[dict[str, Any]], title: str) -> Table:
    t = Table(title=title)
    names = columns(rows)
    for name in names:
        t.add_column(name, justify="right")
    for r in rows:
        t.add_row(*(_cell(r.get(n)) for n in names))
    return t


def write(rows: list[dict[str, Any]], directory: Path, stem: str, note: str) -> list[Path]:
    """CSV and Markdown files of the rows; returns their paths."""
    names = columns(rows)
    csv_path, md_path = directory / f"{stem}.csv", directory / f"{stem}.md"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        for r in rows:
            writer.writerow({n: "" if r.get(n) is None else r.get(n) for n in names})
    lines = ["| " + " | ".join(names) + " |", "|" + " --- |" * len(names)]
    lines += ["| " + " | ".join(_cell(r.get(n)) for n in names) + " |" for r in rows]
    md_path.write_text("\n".join(lines) + f"\n\n{note}\n")
    return [csv_path, md_path]
