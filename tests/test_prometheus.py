"""--metrics-port and --pushgateway against a real Prometheus and Pushgateway (Debian's
packages, private instances on ports of their own): what Prometheus holds of a run, scraped
while it went and pushed at its end, equals summary.json and intervals.jsonl of the same run;
and every panel of the Grafana dashboard in contrib/grafana returns series for it."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.stats.histogram import decode, new_histogram, percentiles
from tests.conftest import ROOT, env, free_port, harness_command, only_run_dir, read_jsonl, unique
from tests.servers import Prometheus, Pushgateway

RUN_ID = "prom-" + str(int(time.time()))
DASHBOARD = ROOT / "contrib" / "grafana" / "harness-dashboard.json"


def wait_for(prometheus: Prometheus, expr: str, seconds: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if result := prometheus.query(expr):
            return result
        time.sleep(0.25)
    raise AssertionError(f"Prometheus has no {expr} after {seconds} s")


def by_group(result: list[dict[str, Any]]) -> dict[str, float]:
    return {r["metric"]["group"]: float(r["value"][1]) for r in result}


def test_prometheus_holds_what_the_run_directory_holds(tmp_path: Path, brokers: Any) -> None:
    # brokers: the broker script installs Prometheus and the Pushgateway where missing.
    port = free_port()
    gateway = Pushgateway(tmp_path / "pushgateway")
    gateway.start()
    prometheus = Prometheus(tmp_path / "prometheus", [f"127.0.0.1:{port}"],
                            pushgateway=f"127.0.0.1:{gateway.ports['http']}")
    try:
        prometheus.start()
        out = tmp_path / "runs"
        # Intervals of 2 s under a scrape a second: every interval is scraped at least once.
        proc = subprocess.Popen(harness_command(
            "run", "-m", "loopback.Sender", "-d", "q", "-rt", "300", "-rl", "12", "-ss", "2",
            "-g", "-m loopback.Receiver -d q", "--run-id", RUN_ID, "--metrics-port",
            str(port), "--pushgateway", f"http://127.0.0.1:{gateway.ports['http']}",
            "--slo", "lost == 0", "-o", str(out)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
        # While the run goes, its figures are there, and Prometheus's own lint passes them.
        wait_for(prometheus, f'harness_rate_messages_per_second{{run_id="{RUN_ID}"}}', 30)
        assert proc.poll() is None, "the run ended before Prometheus saw it"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
            exposed = page.read()
        linted = subprocess.run(["promtool", "check", "metrics"], input=exposed,
                                capture_output=True, timeout=30)
        assert linted.returncode == 0, linted.stdout + linted.stderr
        assert b"harness_latency_seconds_bucket{" in exposed
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
        run_dir = only_run_dir(out)
        assert run_dir is not None
        summary = json.loads((run_dir / "summary.json").read_text())

        # A scrape that fails marks its series stale: the direct ones are read at the last
        # scrape of the run, which saw its final figures.
        selector = f'run_id="{RUN_ID}", job="harness"'
        last = max(float(ts) for series in prometheus.query(
            f'harness_interval{{{selector}}}[10m]') for ts, _ in series["values"])
        at = {"harness": last, "pushgateway": None}
        # Counts equal: scraped at the end of the run, and pushed to the gateway.
        wait_for(prometheus, f'harness_measured_rate_messages_per_second{{run_id="{RUN_ID}", '
                             'job="pushgateway"}')
        for job in ("harness", "pushgateway"):
            for counter, key in (("messages_sent", "sent"), ("messages_received", "received"),
                                 ("errors", "errors"), ("messages_lost", "lost")):
                result = prometheus.query(
                    f'sum by (group) (harness_{counter}_total{{run_id="{RUN_ID}", '
                    f'job="{job}", phase=~"measure|drain"}})', at[job])
                assert by_group(result) == {name: float(g[key]) for name, g in
                                            summary["groups"].items()}, (job, counter)
        rates = by_group(prometheus.query(
            f'harness_measured_rate_messages_per_second{{{selector}}}', at["harness"]))
        assert rates == {name: g["rate"] for name, g in summary["groups"].items()}

        # Each interval's p99, as scraped, equals the interval record's.
        records = {r["interval"]: percentiles(decode(r["hist"]))["p99"]
                   for r in read_jsonl(run_dir / "intervals.jsonl")
                   if r["type"] == "histogram" and r["tag"] == "receiver.latency"}
        index = {ts: int(float(v)) for series in prometheus.query(  # a series a phase
            f'harness_interval{{{selector}}}[10m]') for ts, v in series["values"]}
        p99 = {ts: float(v) for ts, v in prometheus.query(
            f'harness_interval_latency_seconds{{{selector}, group="receiver", '
            'metric="latency", percentile="0.99"}[10m]')[0]["values"]}
        scraped = {index[ts]: round(value * 1e6) for ts, value in p99.items() if ts in index}
        assert len(scraped) >= 3, (index, p99)
        assert scraped == {i: records[i] for i in scraped}

        # The latency histogram adds up in PromQL: its p99 over the measured span and the
        # drain lands in the bucket (26% wide) of the summary's.
        (estimate,) = prometheus.query(
            f'histogram_quantile(0.99, sum by (le) (harness_latency_seconds_bucket{{'
            f'{selector}, group="receiver", metric="latency", phase=~"measure|drain"}}))',
            at["harness"])
        summary_p99 = summary["groups"]["receiver"]["latency"]["p99"] / 1e6
        assert summary_p99 / 1.26 <= float(estimate["value"][1]) <= summary_p99 * 1.26

        # Every panel of the dashboard parses and returns series for the run: while it
        # measured (the last interval's latency), or at its end (the measured span's).
        measuring = float(max(p99))
        dashboard = json.loads(DASHBOARD.read_text())
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                expr = re.sub(r'"\$(group|node)"', '".*"', target["expr"])
                expr = expr.replace("$run_id", RUN_ID).replace("$__rate_interval", "10s")
                assert prometheus.query(expr, measuring) or \
                    prometheus.query(expr, at["harness"]), (panel["title"], expr)
    finally:
        prometheus.stop()
        gateway.stop()


def test_two_nodes_latency_adds_up_in_promql_to_the_merges_p99(tmp_path: Path,
                                                                brokers: Any) -> None:
    """Two nodes of one run, each scraped by a real Prometheus: their latency histograms,
    summed by bucket in PromQL, give the p99 of their run directories' histograms added,
    which is what the merge computes (tests/test_merge.py holds it to that exactly), within
    one bucket. The nodes differ (one's broker holds each message 50 ms), so that neither
    node's own p99 is the answer."""
    ports = [free_port(), free_port()]
    prometheus = Prometheus(tmp_path / "prometheus", [f"127.0.0.1:{p}" for p in ports])
    run_id = f"prom2-{int(time.time())}"
    try:
        prometheus.start()
        procs = []
        for i, (port, delay) in enumerate(zip(ports, ("0", "50"), strict=True)):
            procs.append(subprocess.Popen(harness_command(
                "run", "-m", "loopback.Sender", "-d", "q", "-rt", "200", "-rl", "8", "-ss", "1",
                "--loopback-delay", delay, "-g", "-m loopback.Receiver -d q", "--run-id",
                run_id, "--node", f"node{i}", "--metrics-port", str(port), "-o",
                str(tmp_path / f"node{i}")), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, env=env(), cwd=tmp_path))
        for proc in procs:
            _, stderr = proc.communicate(timeout=90)
            assert proc.returncode == 0, stderr
        run_dirs = [only_run_dir(tmp_path / f"node{i}") for i in range(2)]
        added = new_histogram()
        for run_dir in run_dirs:
            for row in read_jsonl(run_dir / "intervals.jsonl"):
                if row["type"] == "histogram" and row["tag"] == "receiver.latency" and \
                        row["phase"] == "measure":
                    added.add(decode(row["hist"]))
        merged_p99 = percentiles(added)["p99"] / 1e6
        nodes_p99 = [json.loads((d / "summary.json").read_text()
                                )["groups"]["receiver"]["latency"]["p99"] / 1e6
                     for d in run_dirs]
        # The last scrape of each node holds its final counts.
        selector = f'run_id="{run_id}", group="receiver", metric="latency", ' \
                   'phase=~"measure|drain"'
        (estimate,) = wait_for(prometheus, 'histogram_quantile(0.99, sum by (le) ('
                               f'last_over_time(harness_latency_seconds_bucket{{{selector}}}'
                               '[10m])))')
        value = float(estimate["value"][1])
        assert merged_p99 / 1.26 <= value <= merged_p99 * 1.26, (value, merged_p99, nodes_p99)
        # Both nodes are in it: each node's own p99 is far from the merge's.
        assert min(nodes_p99) < merged_p99 / 2, nodes_p99
        nodes = {r["metric"]["node"] for r in prometheus.query(
            f'last_over_time(harness_latency_seconds_count{{{selector}}}[10m])')}
        assert nodes == {"node0", "node1"}
    finally:
        prometheus.stop()


def every_transport(brokers: Any) -> dict[str, list[str]]:
    """A run of each transport with each of its roles, and the options that add families of
    their own (a confirm window's histogram, Kafka's lag by partition, a round trip)."""
    stomp, mqtt = brokers["activemq"]["stomp"], brokers["mosquitto"]["mqtt"]
    amqp, amqp10 = brokers["rabbitmq"]["amqp"], brokers["rabbitmq"]["amqp10"]

    def roles(transport: str, flags: list[str], producer: str = "", pairs: tuple[str, ...] = (
            "Sender Receiver", "Publisher Subscriber", "Requestor Responder")) -> list[str]:
        args: list[str] = []
        for pair in pairs:
            out, back = pair.split()
            name = unique(f"prom.{transport}.{out.lower()}")
            for role, extra in ((out, f"-rt 50 {producer}"), (back, "")):
                args += ["-g", " ".join([f"-m {transport}.{role} -d {name}", *flags, extra])]
        return args[1:]  # the first group's options are the run's own

    stream = unique("PROMJS").replace(".", "_")
    return {
        "loopback": roles("loopback", []),
        "stomp": roles("stomp", stomp, "-pp"),
        "mqtt": roles("mqtt", mqtt, "--qos 1"),
        "amqp": roles("amqp", amqp, "--confirm 20"),
        "amqp10": roles("amqp10", amqp10),
        "nats": roles("nats", []),
        "jetstream": roles("nats", ["--jetstream", f"--stream {stream}", "--storage memory"],
                           pairs=("Sender Receiver",)),
        "redis": roles("redis", []),
        "http": ["-g", "-m http.Requestor -d http://127.0.0.1:8090/ -rt 50"][1:],
        "kafka": roles("kafka", ["--partitions 2"], pairs=("Sender Receiver",)),
    }


def last_page(proc: subprocess.Popen[str], port: int, seconds: float = 180) -> bytes | None:
    """The last page the run's endpoint served while measuring (its second interval or
    later) before the run ended. Ten runs started at once beside Spark took 83 s: a minute's
    wait gave up before the slowest run's last page (the loopback run's, three suite runs
    of three)."""
    page = None
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as got:
                exposed = got.read()
        except OSError:
            time.sleep(0.1)
            continue
        if re.search(rb'^harness_interval\{[^}]*\} ([2-9]|\d\d)', exposed, re.M):
            page = exposed
        time.sleep(0.2)
    return page


def test_every_transports_endpoint_passes_promtool_while_its_roles_run(tmp_path: Path,
                                                                        brokers: Any) -> None:
    """`promtool check metrics` on the endpoint of a run of every transport's roles, read
    while it measures: each transport's families (confirm windows, lag, round trips) too."""
    runs = every_transport(brokers)
    procs, ports = {}, {}
    for name, groups in runs.items():
        ports[name] = free_port()
        first = groups[0].split()
        procs[name] = subprocess.Popen(harness_command(
            "run", *first, *groups[1:], "-rl", "8", "-ss", "1", "--metrics-port",
            str(ports[name]), "-o", str(tmp_path / name)), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    # Read until each run ends, each endpoint by a thread of its own: the last page, served
    # for a last scrape after the run (for 5 s), has every family the run had, and the
    # measured span's figures (one loop over the ten endpoints, beside Spark's load, took
    # longer than that and missed a run's last page).
    with ThreadPoolExecutor(len(procs)) as pool:
        pages = {name: page for name, page in zip(procs, pool.map(
            lambda name: last_page(procs[name], ports[name]), procs), strict=True) if page}
    for name, proc in procs.items():
        _, stderr = proc.communicate(timeout=90)
        assert proc.returncode == 0, (name, stderr[-3000:])
    assert set(pages) == set(runs), f"no page while measuring from {set(runs) - set(pages)}"
    for name, exposed in pages.items():
        linted = subprocess.run(["promtool", "check", "metrics"], input=exposed,
                                capture_output=True, timeout=30)
        assert linted.returncode == 0, (name, linted.stdout + linted.stderr)
        assert b"harness_latency_seconds_bucket{" in exposed, name
        assert b"harness_measured_rate_messages_per_second{" in exposed, name
    # The transports' own families are on their pages (so promtool read them).
    assert b'metric="confirm"' in pages["amqp"] and b'metric="confirm"' in pages["mqtt"]
    assert b"harness_lag_messages{" in pages["kafka"]
