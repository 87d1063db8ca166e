"""A run as OpenMessaging Benchmark's result JSON (`harness export --format omb`), so that
OMB's chart script draws harness runs beside OMB's own.

OMB's figures, from the harness's: publish rate and publish error rate from the producer
groups (sent, errors), consume rate from the consumer groups (received), backlog as the
harness counts it (harness.stats.backlog); publish latency is the send to the broker's
confirmation (the `confirm` histogram) where the transport confirms, else the send call
(`service`); publish delay is the send's lateness against its schedule (`delay`);
end-to-end latency is the consumers' `latency`. The series hold the measured intervals
(OMB's test after its warm-up), the aggregated figures the whole measured span. OMB gives
latencies in milliseconds and the publish delay in microseconds, and so does this.
"""

from __future__ import annotations

from typing import Any

from hdrh.histogram import HdrHistogram

from harness.plan.topology import is_consumer, is_producer
from harness.rundir.reader import RecordedRun
from harness.stats.backlog import Backlog
from harness.stats.figures import rate
from harness.stats.histogram import new_histogram

# OMB's percentile names and values.
POINTS = (("Avg", None), ("50pct", 50.0), ("75pct", 75.0), ("95pct", 95.0), ("99pct", 99.0),
          ("999pct", 99.9), ("9999pct", 99.99), ("99999pct", 99.999), ("Max", 100.0))
QUANTILES = (1.0, 5.0, 10.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 70.0, 75.0, 80.0, 90.0, 95.0,
             97.0, 98.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999, 100.0)
SERIES = ("publishLatency", "publishDelayLatency", "endToEndLatency")


def _value(histogram: HdrHistogram, percentile: float | None, scale: float) -> float:
    if not histogram.get_total_count():
        return 0.0
    if percentile is None:
        return histogram.get_mean_value() / scale
    if percentile == 100.0:
        return histogram.get_max_value() / scale
    return histogram.get_value_at_percentile(percentile) / scale


def _latencies(groups: dict[str, Any], producers: list[str],
               consumers: list[str]) -> dict[str, HdrHistogram]:
    """OMB's three latencies of these groups (an interval's, or the whole span's), merged."""
    out = {name: new_histogram() for name in SERIES}

    def add(name: str, histogram: HdrHistogram | None) -> None:
        if histogram is not None and histogram.get_total_count():
            out[name].add(histogram)

    for name in producers:
        if name in groups:
            h = groups[name].histograms
            confirm = h.get("confirm")
            add("publishLatency", confirm if confirm is not None and
                confirm.get_total_count() else h.get("service"))
            add("publishDelayLatency", h.get("delay"))
    for name in consumers:
        if name in groups:
            add("endToEndLatency", groups[name].histograms.get("latency"))
    return out


def _total(view: Any, names: list[str], counter: str) -> int:
    return sum(view.groups[n].counters[counter] for n in names if n in view.groups)


def _scale(series: str) -> float:
    return 1.0 if series == "publishDelayLatency" else 1000.0  # us, else ms


def omb_result(recorded: RecordedRun) -> dict[str, Any]:
    """The run's figures under OMB's names."""
    run = recorded.run
    producers = [g.name for g in run.groups if is_producer(g.role)]
    consumers = [g.name for g in run.groups if is_consumer(g.role)]
    first = next((g for g in run.groups if is_producer(g.role)), run.groups[0])
    topics = first.destination_count
    consumer_threads = sum(g.threads * g.processes for g in run.groups if is_consumer(g.role))
    out: dict[str, Any] = {
        "workload": run.name, "driver": first.module.split(".")[0],
        "messageSize": first.size, "topics": topics,
        "partitions": int(first.options.get("partitions", 1)),
        "producersPerTopic": first.threads * first.processes // topics,
        "consumersPerTopic": consumer_threads // topics,
        "publishRate": [], "publishErrorRate": [], "consumeRate": [], "backlog": []}
    for series in SERIES:
        for label, _ in POINTS:
            out[f"{series}{label}"] = []
    backlog = Backlog(run)
    replay = recorded.replay()
    for view in replay.views():
        value = backlog.after(view)
        if view.phase != "measure":
            continue
        out["publishRate"].append(rate(_total(view, producers, "sent"), view.length))
        out["publishErrorRate"].append(rate(_total(view, producers, "errors"), view.length))
        out["consumeRate"].append(rate(_total(view, consumers, "received"), view.length))
        out["backlog"].append(value)
        for series, histogram in _latencies(view.groups, producers, consumers).items():
            for label, percentile in POINTS:
                out[f"{series}{label}"].append(_value(histogram, percentile, _scale(series)))
    totals = {t.spec.name: t for t in replay.stats.groups}
    for series, histogram in _latencies(totals, producers, consumers).items():
        name = f"aggregated{series[0].upper()}{series[1:]}"
        for label, percentile in POINTS:
            out[f"{name}{label}"] = _value(histogram, percentile, _scale(series))
        out[f"{name}Quantiles"] = {
            str(q): _value(histogram, q, _scale(series)) for q in QUANTILES
            if histogram.get_total_count()}
    return out
