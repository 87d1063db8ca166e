"""Distributed runs on real Spark executors: `local-cluster[2,1,1024]` starts two executor JVMs
from the pip-installed pyspark, and every node is one task of a barrier stage on them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from tests.conftest import (
    ROOT,
    SECRET,
    assert_secret_kept,
    env,
    free_port,
    harness_command,
    java_total,
    read_jsonl,
    watched,
)
from tests.servers import Pushgateway
from tests.test_profiles import tiny_sweep

MASTER = "local-cluster[2,1,1024]"
CLUSTER = ["--cluster", MASTER, "--nodes", "2", "--no-ui"]


def node_dirs(run_dir: Path) -> list[Path]:
    return sorted(p for p in (run_dir / "nodes").iterdir() if p.is_dir())


def measured_histogram(rows: list[dict], tag: str) -> HdrHistogram:
    total = HdrHistogram(1, 3_600_000_000, 3)
    for row in rows:
        if row["type"] == "histogram" and row["tag"] == tag and row["phase"] != "warmup":
            total.decode_and_add(row["hist"])
    return total


def summary_lines(text: str) -> list[str]:
    """The summary's figures as printed: from its heading, less where the run is."""
    lines = text.splitlines()
    return [line for line in lines[next(i for i, line in enumerate(lines)
                                        if line.startswith("Summary:")):]
            if not line.startswith("run directory:")]


def histogram_lines(hlog: Path) -> list[str]:
    return [line for line in hlog.read_text().splitlines()
            if line and not line.startswith("#") and not line.startswith('"StartTimestamp"')]


def assert_written_as_harness_merge_writes(harness, result, tmp_path: Path) -> None:
    """A distributed run's merged files are, record for record and histogram for histogram,
    what `harness merge` writes of its nodes' directories, and `harness view` of the run
    prints the summary the run printed."""
    assert result.run_dir is not None
    again = tmp_path / "merged-again"
    merged = harness("merge", "-o", str(again), *map(str, node_dirs(result.run_dir)),
                     timeout=300)
    assert merged.code == 0, merged.stderr
    # The same records (within an interval the nodes' come in the shuffle's order) ...
    ours = (result.run_dir / "intervals.jsonl").read_text().splitlines()
    assert ours and sorted(ours) == sorted((again / "intervals.jsonl").read_text().splitlines())
    # ... interval after interval.
    slots = [json.loads(line).get("interval", -1) for line in ours]
    assert [s for s in slots if s >= 0] == sorted(s for s in slots if s >= 0)
    hlog = histogram_lines(result.run_dir / "merged.hlog")
    assert hlog and sorted(hlog) == sorted(histogram_lines(again / "merged.hlog"))
    # HdrHistogram's own decoder reads every line of it.
    assert sum(HdrHistogram.decode(line.rsplit(",", 1)[1]).get_total_count()
               for line in hlog) > 0
    viewed = harness("view", "--no-ui", str(result.run_dir))
    assert viewed.code == 0, viewed.stderr
    assert summary_lines(viewed.stdout) == summary_lines(result.stdout)


def test_two_nodes_run_a_loopback_job_and_merge_exactly(harness, brokers, tmp_path,
                                                        monkeypatch):
    # brokers: the broker script installs the Pushgateway this test starts a private one of.
    gateway = Pushgateway(tmp_path / "pushgateway")
    gateway.start()
    # The run's temporary files in a directory of its own: another distributed test beside
    # this one ships its own zip meanwhile.
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    try:
        result = harness("run", "-m", "loopback.Sender", "-d", "Q", "--rate", "2000",
                         "-g", "-m loopback.Receiver -d Q", "-sw", "1", "-rl", "4", "-ss", "1",
                         "--slo", "sender.rate >= 0.9 * target", "--slo", "receiver.received "
                         ">= 1", "--pushgateway", f"http://127.0.0.1:{gateway.ports['http']}",
                         "--push-intervals", *CLUSTER, timeout=300, output=False)
        with urllib.request.urlopen(f"http://127.0.0.1:{gateway.ports['http']}/metrics",
                                    timeout=10) as response:
            pushed = response.read().decode()
    finally:
        gateway.stop()
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    # The zip of the harness shipped to the executors is gone with the run.
    assert not list(temporary.glob("harness-ship-*"))
    nodes = node_dirs(result.run_dir)
    assert len(nodes) == 2
    manifests = [json.loads((n / "manifest.json").read_text()) for n in nodes]
    # Separate tasks named by host and rank, separate executor processes.
    assert sorted(m["node"][-6:] for m in manifests) == ["-task0", "-task1"]
    assert all(m["status"] == "complete" for m in manifests)
    # The group's --rate is divided across the nodes.
    assert [g["rate"] for m in manifests for g in m["options"]["groups"]
            if g["name"] == "sender"] == [1000.0, 1000.0]
    assert result.summary["given"]["each_node"]["sender"] == {
        "threads": 1, "thread_rate": 1000.0, "messages": 0}
    # Offsets measured against the driver and recorded; one start, in the driver's clock.
    clocks = [m["clock"] for m in manifests]
    assert all(c["reference_node"] == "driver" and c["round_trip_s"] > 0 for c in clocks)
    starts = [m["start"] + c["offset_estimate_s"] for m, c in zip(manifests, clocks, strict=True)]
    assert abs(starts[0] - starts[1]) < 0.05
    # Each node's first messages went out on time: it began its schedule at that start.
    for n in nodes:
        first = [r for r in read_jsonl(n / "intervals.jsonl")
                 if r["type"] == "histogram" and r["tag"] == "sender.delay"
                 and r["interval"] == 0]
        assert first and max(r["max"] for r in first) < 50_000
    # The merged run holds every node's messages, histograms added value for value.
    merged_rows = result.records()
    node_rows = [r for n in nodes for r in read_jsonl(n / "intervals.jsonl")]
    for tag in ("receiver.latency", "sender.service"):
        merged, summed = measured_histogram(merged_rows, tag), measured_histogram(node_rows,
                                                                                   tag)
        assert merged.get_total_count() == summed.get_total_count() > 0
        for q in (50, 90, 99, 99.9, 100):
            assert merged.get_value_at_percentile(q) == summed.get_value_at_percentile(q)
    sent = [json.loads((n / "summary.json").read_text())["groups"]["sender"]["sent"]
            for n in nodes]
    summary = result.summary
    assert summary["groups"]["sender"]["sent"] == sum(sent) > 0
    # What the warm-up left in flight is received while measured (a loaded machine leaves a
    # few): the receivers hold exactly the measured sends and that.
    warmup = {key: sum(r[key] for r in node_rows if r["type"] == "counters"
                       and r["phase"] == "warmup") for key in ("sent", "received")}
    assert summary["groups"]["receiver"]["received"] == sum(sent) + warmup["sent"] - \
        warmup["received"]
    assert summary["groups"]["sender"]["rate"] == sum(
        json.loads((n / "summary.json").read_text())["groups"]["sender"]["rate"] for n in nodes)
    # The thresholds judged the merged figures: the target is the run's 2,000/s, not a
    # node's, and the count is both nodes'.
    rate_check, count_check = summary["slo"]["thresholds"]
    assert rate_check["limit"] == 1800 and rate_check["value"] == summary["groups"][
        "sender"]["rate"]
    assert count_check["value"] == summary["groups"]["receiver"]["received"]
    assert summary["slo"]["passed"]
    assert "Thresholds: all met" in (result.run_dir / "report.html").read_text()
    # The driver pushed the merged counts, and each node's rate under its own name.
    pushed_sent = sum(float(value) for value in re.findall(
        r'harness_messages_sent_total\{[^}]*group="sender"[^}]*phase="(?:measure|drain)"'
        r'[^}]*\} (\S+)', pushed))
    assert pushed_sent == summary["groups"]["sender"]["sent"], pushed
    node_names = set(re.findall(r'harness_node_rate_messages_per_second\{[^}]*node="([^"]+)"',
                                pushed))
    assert sorted(n[-6:] for n in node_names) == ["-task0", "-task1"], node_names
    # Live: the driver showed every interval merged, with a line per node.
    assert result.stdout.count("node ") >= 2 * 3
    assert "clock offset" in result.stdout
    # Written in the default runs/ under the working directory, which the executors'
    # working directories are not: the merged files are whole all the same.
    assert result.run_dir.parent == tmp_path / "runs"
    assert_written_as_harness_merge_writes(harness, result, tmp_path)
    # HdrHistogram's reference Java reader adds each tag of the merged log and of each node's
    # log up to the count of its records (the measured span and the drain).
    logs = [(result.run_dir / "merged.hlog", merged_rows)] + [
        (next(n.glob("*.hlog")), read_jsonl(n / "intervals.jsonl")) for n in nodes]
    for log, rows in logs:
        for tag in ("sender.service", "receiver.latency"):
            expected = measured_histogram(rows, tag).get_total_count()
            assert java_total(log, tag, tmp_path / "java") == expected > 0, (log, tag)


def test_two_nodes_share_a_real_brokers_queue_and_a_kafka_consumer_group(brokers, tmp_path):
    """One run of two nodes (one Spark start for both): receivers on both compete for one
    ActiveMQ queue that senders on both fill, and are members of one consumer group on Tansu
    whose topic's partitions the senders on both fill. Each node sees the other's producers,
    and nothing is lost or counted twice. The STOMP login's password, given by environment
    variable, is in no process's command line while the run goes (the driver, its Spark, the
    executors, the nodes' processes), nor in anything the run printed or wrote."""
    queue, topic = f"dist.{time.time_ns()}", f"dist-{time.time_ns()}"
    stomp = ["--port", "61613", "--flavour", "activemq", "--user", "bench", "--password-env",
             "MQTT_SECRET"]
    kafka = ["--port", "9092"]
    out = tmp_path / "runs"
    # A warm-up for the consumer group to form: the second node's member joins a group the
    # first already reads.
    args = ("run", "-m", "stomp.Sender", "-d", queue, "-rt", "200", "--processes", "2", *stomp,
            "-gn", "stomp-sender",
            "-g", " ".join(["-m stomp.Receiver -d", queue, *stomp, "-gn stomp-receiver"]),
            "-g", " ".join(["-m kafka.Sender -d", topic, "-rt 200 --partitions 2",
                            "--keys sequence", *kafka, "-gn kafka-sender"]),
            "-g", " ".join(["-m kafka.Receiver -d", topic, *kafka, "-gn kafka-receiver"]),
            "-sw", "4", "-rl", "7", "-ss", "1", "--drain", "5", "-o", str(out), *CLUSTER)
    proc = subprocess.Popen(harness_command(*args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env())
    stdout, stderr, lines = watched(proc, 300)
    assert proc.returncode == 0, stderr
    assert len(lines) > 5 and any("CoarseGrainedExecutorBackend" in line for line in lines)
    (run_dir,) = out.iterdir()
    assert_secret_kept(SECRET, args, stdout, stderr, lines, run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    groups = summary["groups"]
    sent, received = groups["stomp-sender"]["sent"], groups["stomp-receiver"]
    assert sent > 0
    # Every message sent was received by one node's receivers or the other's: the union of
    # both nodes' receipts (the merge's) holds each once. A message ActiveMQ gave again to the
    # other node's receiver when a receiver's connection closed at the end (its automatic
    # acknowledgement not yet processed) arrives twice, and is counted so: duplicated, not
    # received in place of one lost (the whole suite on a new machine: 2,402 of 2,400).
    # (The delivery check counts the warm-up and the drain too.)
    [queued] = [d for d in summary["delivery"] if queue in json.dumps(d)]
    assert queued["by_sequence"] and queued["missing"] == queued["unexpected"] == 0, queued
    assert queued["received"] == queued["expected"] + queued["duplicated"], queued
    assert received["lost"] == 0
    [check] = [d for d in summary["delivery"] if topic in json.dumps(d)]
    # A rebalance hands partitions over, and one suite run saw 4 of 2,800 messages
    # delivered twice and 4 never (under investigation). Until it is understood, at most 1%
    # either way, each counted.
    assert check["expected"] > 0
    assert check["missing"] <= 0.01 * check["expected"], check
    assert check["duplicated"] <= 0.01 * check["expected"], check


def test_a_node_that_cannot_reach_the_broker_fails_the_run_with_its_own_line(harness):
    result = harness("run", "-m", "stomp.Sender", "-d", "Q", "--port", "1", "-rt", "10",
                     "-rl", "2", *CLUSTER, timeout=300)
    assert result.code == 1
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("harness: error")]
    assert len(lines) == 1
    assert "node " in lines[0] and "-task0: " in lines[0] and "-task1: " in lines[0]
    assert "127.0.0.1:1" in lines[0]


def test_a_driver_the_executors_cannot_reach_is_named_with_the_flag_that_sets_it(harness):
    # The listener is on 127.0.0.1; 127.0.0.2 is this machine too, where nothing listens.
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rl", "2", *CLUSTER,
                     "--driver-host", "127.0.0.2", timeout=300)
    assert result.code == 1
    assert "Traceback" not in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("harness: error")]
    assert "cannot reach the driver at 127.0.0.2:" in line and "--driver-host" in line


def test_bad_cluster_input_is_refused_in_one_line_before_spark_starts(harness):
    for flags, where in ((["--nodes", "3"], "--nodes"), (["--spark-conf", "memory"],
                                                        "--spark-conf"),
                         (["--nodes", "0"], "--nodes"), (["--driver-port", "70000"],
                                                          "--driver-port"),
                         (["--driver-host", "10.0.0.5:http"], "--driver-host"),
                         (["--driver-host", ":9000"], "--driver-host")):
        result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rl", "1", "--no-ui",
                         "--cluster", MASTER, *flags, timeout=60)
        assert result.code == 2
        assert result.stderr.startswith(f"harness: error: {where}: "), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert "starting Spark" not in result.stdout
    alone = harness("run", "-m", "loopback.Sender", "-d", "Q", "--nodes", "2", timeout=60)
    assert alone.code == 2 and alone.stderr.startswith("harness: error: --nodes: with "
                                                       "--cluster MASTER, or beside --run-id")


def test_a_sweep_with_a_cluster_block_runs_each_point_on_every_node(harness, tmp_path):
    path = tiny_sweep(tmp_path)
    runs = tmp_path / "runs"
    # The profile's cluster: block gives the master, the nodes and the output.
    path.write_text(path.read_text().replace(f", output: {runs}", "") + textwrap.dedent(f"""\
        cluster:
          master: {MASTER}
          nodes: 1
          executor-memory: 512m
          output: {runs}
        """))
    done = harness("run", str(path), "--set", "cluster.nodes=2", "--no-ui", output=False,
                   timeout=400)
    assert done.code == 0, done.stderr
    (root,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    points = sorted(p for p in root.iterdir() if p.is_dir())
    assert len(points) == 2
    # Each point is one distributed run: both nodes' directories, merged.
    assert all(len(node_dirs(p)) == 2 for p in points)
    dispatched = [json.loads((p / "summary.json").read_text())["throughput"]["dispatched"]
                  for p in points]
    # 300/s per publisher thread, on each of two nodes, to one then two subscribers.
    # Within 1%: a message of the last instant may land after a node's stop on a busy machine.
    assert dispatched == pytest.approx([600, 1200], rel=0.01)


def test_a_standalone_cluster_runs_an_mqtt_job_on_two_nodes(harness, brokers, tmp_path):
    """A Master and a Worker started from the pip-installed pyspark; each node runs in an
    executor the Worker launched, against Mosquitto. The cluster runs in a mount namespace
    of its own where the run's output directory is another (empty) file system, as on
    machines of their own: the executors see nothing the driver writes there."""
    port = free_port()
    state = tmp_path / "spark"
    script = ["bash", str(ROOT / "contrib" / "spark" / "standalone.sh")]
    spark_env = {**os.environ, "HARNESS_SPARK_PORT": str(port), "HARNESS_SPARK_STATE": str(state),
                 "PYTHON": sys.executable}
    hidden = tmp_path / "runs"
    hidden.mkdir()
    subprocess.run(["unshare", "--mount", "bash", "-c",
                    'mount -t tmpfs harness-elsewhere "$0" && exec "$@"', str(hidden),
                    *script, "start"], env=spark_env, check=True, timeout=120)
    try:
        topic = f"dist/{time.time_ns()}"
        # The publishers as 20 clients a node (--clients is per process, as -nt is).
        result = harness("run", "-m", "mqtt.Publisher", "-d", topic, "--clients", "20",
                         "--rate", "200",
                         "-g", f"-m mqtt.Subscriber -d {topic}", "-rl", "3", "-ss", "1",
                         "--drain", "1", "--cluster", f"spark://127.0.0.1:{port}", "--nodes", "2",
                         "--spark-conf", "spark.executor.cores=1",
                         "--spark-conf", "spark.executor.memory=1g", "--no-ui", timeout=300)
    finally:
        subprocess.run([*script, "stop"], env=spark_env, check=True, timeout=60)
    assert result.code == 0, result.stderr
    # Two executors of the Worker's, one node in each.
    (app,) = (state / "work").iterdir()
    assert sorted(p.name for p in app.iterdir()) == ["0", "1"]
    assert len(node_dirs(result.run_dir)) == 2
    groups = result.summary["groups"]
    # Each node's 20 clients connected once each, and the rate was split over the nodes.
    clients = [r for r in result.records("counters") if r["group"] == "publisher"]
    assert {r["node"] for r in clients} == {r["node"] for r in clients if r["clients"] == 20}
    assert len({r["node"] for r in clients}) == 2
    assert sum(r["count"] for r in result.records("histogram")
               if r["tag"] == "publisher.connect") == 40
    # Each publisher's messages reach the subscribers of both nodes.
    assert groups["publisher"]["sent"] == pytest.approx(200 * 3, rel=0.1)
    assert groups["subscriber"]["received"] == 2 * groups["publisher"]["sent"]
    assert groups["subscriber"]["lost"] == groups["subscriber"]["duplicated"] == 0
    assert_written_as_harness_merge_writes(harness, result, tmp_path)


def test_two_machines_started_by_hand_compete_for_a_queue_and_merge_with_no_loss(
        harness, brokers, tmp_path):
    """Two nodes given one --run-id and --nodes 2 by hand, each a Sender and a Receiver on
    one RabbitMQ queue: each receiver gets part of both senders' messages. The merge
    balances the queue over both nodes: nothing lost, none missing."""
    queue = f"hand.{time.time_ns()}"
    run_id = f"hand{time.time_ns() % 10**8}"
    procs = [subprocess.Popen(harness_command(
        "run", "-m", "amqp.Sender", "-d", queue, "-rt", "200", "-g",
        f"-m amqp.Receiver -d {queue} --ack client-individual", "-rl", "3", "-ss", "1",
        "--drain", "3", "--node", node, "--run-id", run_id, "--nodes", "2", "--no-ui",
        "-o", str(tmp_path / node)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env(), cwd=tmp_path) for node in ("a", "b")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    dirs = [str(d) for node in ("a", "b") for d in (tmp_path / node).iterdir()]
    for d in dirs:
        # Each node received part of both senders' streams: gaps, but none counted lost.
        summary = json.loads((Path(d) / "summary.json").read_text())
        assert summary["groups"]["receiver"]["lost"] == 0
        assert summary["delivery"] == []  # one node alone cannot balance the queue
    merged = harness("merge", *dirs, "-o", str(tmp_path / "merged"), timeout=300)
    assert merged.code == 0, merged.stderr
    run = json.loads((tmp_path / "merged" / "summary.json").read_text())["runs"][run_id]
    sender, receiver = run["groups"]["sender"], run["groups"]["receiver"]
    assert sender["sent"] > 1000 and receiver["received"] == sender["sent"]
    assert receiver["lost"] == receiver["duplicated"] == 0
    (delivery,) = run["delivery"]
    assert delivery["expected"] == sender["sent"]
    assert delivery["missing"] == delivery["unexpected"] == 0


