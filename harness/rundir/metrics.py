"""The run's figures for Prometheus (--metrics-port, --pushgateway), through prometheus-client:
served as OpenMetrics at /metrics while the run goes, pushed to a Pushgateway at the end
(and, with --push-intervals, at every interval).

Per group, labelled run_id, node, group, module and destination:
- counters (`harness_messages_sent_total` ...), labelled by phase too (warmup, measure,
  drain): summary.json's counts are those of measure and drain;
- the last interval's rate, threads alive, client CPU, and `harness_interval` (its index,
  labelled by phase); where the transport reports it, each partition's (Kafka) or
  destination's (AMQP, JetStream, Redis Streams) lag
  (`harness_lag_messages`, labelled partition);
- each latency metric (latency, service, delay, confirm) as a Prometheus histogram in
  seconds, `harness_latency_seconds` (cumulative `_bucket{le}` counters by phase,
  ten buckets a decade from 10 us to 100 s), which PromQL adds across nodes, processes and
  time: `histogram_quantile(0.99, sum by (le) (rate(..._bucket[1m])))`;
- the last interval's percentiles of each latency metric, in seconds, from its HDR histogram
  as the interval record has it: `harness_interval_latency_seconds` with labels metric and
  percentile (0.5, 0.9, 0.99, 0.999, 1 for the maximum: a gauge's label, which only a
  summary may call quantile);
- at the end, the summary's rate and percentiles (`harness_measured_*`), the floor, and each
  threshold's verdict (`harness_slo_passed`).
A distributed run's driver serves the merged figures, and each node's rate and CPU labelled
with the node's name.

Each interval makes a whole new set of families and swaps it in at once: a scrape sees one
interval's figures, never half of two."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, push_to_gateway
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from harness.plan.run import RunSpec
from harness.rundir.sinks import Closed, Sink
from harness.stats.figures import rate
from harness.stats.histogram import percentiles

COUNTED = {"sent": "messages_sent", "received": "messages_received", "errors": "errors",
           "lost": "messages_lost", "duplicated": "messages_duplicated",
           "reordered": "messages_reordered", "refused": "sends_refused",
           "in_doubt": "sends_in_doubt", "untaken": "sends_untaken", "failed": "sends_failed",
           "reconnects": "reconnects",
           "timeouts": "timeouts",
           "redelivered": "messages_redelivered", "rebalances": "rebalances", "bytes": "bytes",
           "connect_failed": "connections_failed"}
QUANTILES = {"p50": "0.5", "p90": "0.9", "p99": "0.99", "p99.9": "0.999", "max": "1"}
LABELS = ["run_id", "node", "group", "module", "destination"]
# How long the end of a run waits for a scrape that sees its last figures.
LAST_SCRAPE_S = 5.0
# The latency histograms' upper bounds in microseconds: ten a decade (a bucket 26% wide),
# 10 us to 100 s, so that histogram_quantile lands within a quarter of the HDR figure.
BOUNDS_US = [round(10 * 10 ** (i / 10), 3) for i in range(71)]


class Metrics(Sink, Collector):
    def __init__(self, run: RunSpec, run_id: str, metrics: dict[int, list[str]],
                 say: Callable[[str], None]) -> None:
        self.run, self.run_id, self.say = run, run_id, say
        self.labels = {g.name: [run_id, run.node, g.name, g.module, g.destination or ""]
                       for g in run.groups}
        self.metrics = {g.name: metrics[i] for i, g in enumerate(run.groups)}
        self.names = [g.name for g in run.groups]
        # (group, counter, phase) -> the run's total so far
        self.totals: dict[tuple[str, str, str], float] = {}
        # (group, metric, phase) -> counts a bucket (BOUNDS_US, then +Inf) and the sum (s)
        self.buckets: dict[tuple[str, str, str], list[float]] = {}
        self.last: list[Metric] = []  # the last interval's gauges
        self.final: list[Metric] = []  # the summary's
        self.families: list[Metric] = []  # what a scrape sees: swapped whole
        self.scrapes = 0  # collections: scrapes and pushes
        self.pushes = 0
        self.updated = 0  # scrapes seen when the figures last changed
        # The highest scrape whose page has been written out whole: a scrape counted when
        # collected was still being sent when the run ended and its process exited, and the
        # scraper lost the final figures.
        self.served = 0
        self.scraping = threading.local()  # the scrape a request thread collected
        self.push_failed = False
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self.server = None
        if run.metrics_port is not None:
            from prometheus_client import start_http_server
            try:
                self.server, _ = start_http_server(run.metrics_port, run.metrics_host,
                                                   registry=self.registry)
            except OSError as exc:
                from harness.errors import BadInput
                raise BadInput("--metrics-port", f"cannot listen on {run.metrics_host}:"
                               f"{run.metrics_port}: {exc.strerror or exc}") from None
            serve = self.server.finish_request

            def finish_request(request: Any, address: Any) -> None:
                serve(request, address)  # the page collected, written and flushed
                self.served = max(self.served, getattr(self.scraping, "number", 0))

            self.server.finish_request = finish_request
            # The page answers from the start: every group's counters at zero, in the phase
            # the run begins with, until the first interval ends.
            first = "warmup" if run.warmup else "measure"
            for name in self.names:
                for key in COUNTED:
                    self.totals[(name, key, first)] = 0.0
            self._swap()
            host, port = self.server.server_address[:2]
            say(f"metrics: http://{host}:{port}/metrics (every counter at 0 until the first "
                "interval ends)")

    # -- prometheus-client's side
    def collect(self) -> Iterator[Metric]:
        self.scrapes += 1
        self.scraping.number = self.scrapes
        return iter(self.families)

    def describe(self) -> Iterator[Metric]:
        return iter(())

    # -- the run's side
    def interval(self, closed: Closed) -> None:
        view = closed.view
        rates = GaugeMetricFamily("harness_rate_messages_per_second", "messages a second "
                                  "the group counted over the last interval", labels=LABELS)
        threads = GaugeMetricFamily("harness_threads_alive", "the group's threads alive",
                                    labels=LABELS)
        clients = GaugeMetricFamily("harness_clients_connected", "the group's clients "
                                    "connected (--clients)", labels=LABELS)
        cpu = GaugeMetricFamily("harness_client_cpu_percent", "% of one core of the group's "
                                "busiest process over the last interval", labels=LABELS)
        lag = GaugeMetricFamily("harness_lag_messages", "messages on each partition (Kafka) "
                                "or destination (a queue's depth, a stream consumer's "
                                "pending) the group's consumers had not taken, as last "
                                "read", labels=[*LABELS, "partition"])
        latency = GaugeMetricFamily("harness_interval_latency_seconds", "the last interval's "
                                    "percentiles of each latency metric, from its HDR "
                                    "histogram", labels=[*LABELS, "metric", "percentile"])
        # Counted by each process's own phase: the nodes of a distributed run cross the
        # warm-up's end at their own instants within one merged interval.
        for report in closed.reports:
            for index, part in report.groups.items():
                name = self.names[index]
                for key in COUNTED:  # zeros too: a dashboard's "lost" shows 0, not "no data"
                    slot = (name, key, report.phase)
                    self.totals[slot] = self.totals.get(slot, 0) + part.counters.get(key, 0)
        for name, group in view.groups.items():
            labels = self.labels[name]
            rates.add_metric(labels, rate(group.count, view.length))
            threads.add_metric(labels, group.threads_up)
            if group.clients:
                clients.add_metric(labels, group.clients_up)
            cpu.add_metric(labels, group.cpu)
            for partition, (_, behind) in (group.partitions or {}).items():
                if behind >= 0:
                    lag.add_metric([*labels, partition], behind)
            for metric, histogram in group.histograms.items():
                if histogram.get_total_count():  # nothing measured: no figure, not a stale one
                    for pct, value in percentiles(histogram).items():
                        latency.add_metric([*labels, metric, QUANTILES[pct]], value / 1e6)
                    self._bucket(name, metric, view.phase, histogram)
        index = GaugeMetricFamily("harness_interval", "the last interval closed, and its "
                                  "phase", labels=["run_id", "phase"])
        index.add_metric([self.run_id, view.phase], closed.index)
        self.last = [rates, threads, clients, cpu, latency, lag, index]
        node_rate = GaugeMetricFamily("harness_node_rate_messages_per_second", "each "
                                      "node's rate of each group over the last interval",
                                      labels=["run_id", "node", "group"])
        node_cpu = GaugeMetricFamily("harness_node_client_cpu_percent", "each node's "
                                     "busiest process over the last interval",
                                     labels=["run_id", "node"])
        for node, share in view.nodes.items():
            for name, value in share.rates(view.length).items():
                node_rate.add_metric([self.run_id, node, name], value)
            node_cpu.add_metric([self.run_id, node], share.cpu)
        if not view.nodes:  # one node: this one
            for name, group in view.groups.items():
                node_rate.add_metric([self.run_id, self.run.node, name],
                                     rate(group.count, view.length))
            node_cpu.add_metric([self.run_id, self.run.node], view.cpu_max)
        self.last += [node_rate, node_cpu]
        self._swap()
        if self.run.pushgateway and self.run.push_intervals:
            self._push()

    def summarize(self, summary: dict[str, Any]) -> None:
        rates = GaugeMetricFamily("harness_measured_rate_messages_per_second", "the group's "
                                  "rate over the measured span (summary.json)", labels=LABELS)
        latency = GaugeMetricFamily("harness_measured_latency_seconds", "the measured span's "
                                    "percentiles (summary.json)",
                                    labels=[*LABELS, "metric", "percentile"])
        for name, group in summary.get("groups", {}).items():
            labels = self.labels.get(name)
            if labels is None:
                continue
            rates.add_metric(labels, group.get("rate") or 0.0)
            for metric in self.metrics.get(name, ()):
                for pct, value in (group.get(metric) or {}).items():
                    if value is not None and pct in QUANTILES:
                        latency.add_metric([*labels, metric, QUANTILES[pct]], value / 1e6)
        self.final = [rates, latency]
        floor = summary.get("floor")
        if floor and floor.get("samples"):
            family = GaugeMetricFamily("harness_floor_seconds", "the harness's own wake-up "
                                       "and hand-off latency under the run's load",
                                       labels=["run_id", "node", "percentile"])
            for pct, quantile in QUANTILES.items():
                if floor.get(pct) is not None:
                    family.add_metric([self.run_id, self.run.node, quantile], floor[pct] / 1e6)
            self.final.append(family)
        verdict = summary.get("slo")
        if verdict:
            family = GaugeMetricFamily("harness_slo_passed", "1 if the threshold was met, 0 "
                                       "if missed", labels=["run_id", "threshold"])
            for v in verdict["thresholds"]:
                family.add_metric([self.run_id, v["threshold"]], 1 if v["passed"] else 0)
            self.final.append(family)
        self._swap()
        if self.run.pushgateway:
            self._push()
        self._last_scrape()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def _swap(self) -> None:
        counters = {key: CounterMetricFamily(f"harness_{name}", f"{key} per group, by phase "
                                             "(summary.json counts measure and drain)",
                                             labels=[*LABELS, "phase"])
                    for key, name in COUNTED.items()}
        for (group, key, phase), value in sorted(self.totals.items()):
            counters[key].add_metric([*self.labels[group], phase], value)
        histograms = HistogramMetricFamily(
            "harness_latency_seconds", "each latency metric's values since the "
            "run began, by phase (summary.json holds measure and drain)",
            labels=[*LABELS, "metric", "phase"])
        for (group, metric, phase), counts in sorted(self.buckets.items()):
            running, cumulative = 0.0, []
            for bound, count in zip([*(f"{b / 1e6:g}" for b in BOUNDS_US), "+Inf"],
                                    counts[:-1], strict=True):
                running += count
                cumulative.append((bound, running))
            histograms.add_metric([*self.labels[group], metric, phase], cumulative,
                                  sum_value=counts[-1])
        self.families = [*counters.values(), histograms, *self.last, *self.final]
        self.updated = self.scrapes

    def _bucket(self, group: str, metric: str, phase: str, histogram: Any) -> None:
        """An interval's HDR histogram added to the group's Prometheus buckets."""
        counts = self.buckets.setdefault((group, metric, phase),
                                         [0.0] * (len(BOUNDS_US) + 2))
        for item in histogram.get_recorded_iterator():
            value, count = item.value_iterated_to, item.count_at_value_iterated_to
            counts[bisect.bisect_left(BOUNDS_US, value)] += count
            counts[-1] += count * value / 1e6

    def _push(self) -> None:
        """A Pushgateway that is down is said once; the run goes on."""
        try:
            push_to_gateway(self.run.pushgateway or "", job="harness", registry=self.registry,
                            grouping_key={"run_id": self.run_id}, timeout=5)
        except Exception as exc:  # urllib's, in its own words
            if not self.push_failed:
                self.say(f"--pushgateway {self.run.pushgateway}: cannot push ({exc})")
            self.push_failed = True
        self.pushes += 1
        self.updated = self.scrapes  # a push is not a scrape

    def _last_scrape(self) -> None:
        """Serving, and scraped already, wait a little for a scrape of the final figures."""
        if self.server is None or self.scrapes == self.pushes:
            return
        deadline = time.monotonic() + LAST_SCRAPE_S
        while self.served <= self.updated and time.monotonic() < deadline:
            time.sleep(0.05)
