"""The driver of a distributed run: fans the run out as one Spark barrier stage of N tasks,
shows it live, stops it, and merges it.

It offers what the live screen and the console need of a controller (prepare, measure,
request_stop, toggle_pause, change_rate, the run's state), so that a distributed run is
shown exactly as a single-machine one, with a row per node beside the merged groups. Every
node's intervals arrive over its link (harness.distributed.wire) and are merged with the
same statistics as one machine's processes (harness.stats.intervals); its run files come
the same way as they grow (harness.distributed.shipping), and at the end the node
directories are merged exactly by the Spark merge, in the same session.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import re
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from harness.clock import epoch_ns
from harness.distributed.cluster import (
    ClusterSpec,
    driver_address,
    spark_conf,
    wait_for_slots,
)
from harness.distributed.node import NodePayload, node_main
from harness.distributed.package import executor_lacks, harness_zip
from harness.distributed.shipping import Landing
from harness.distributed.split import node_spec
from harness.distributed.wire import Link, report_from_wire
from harness.engine.runner import LiveControls, RunResult, Signals, recorded_options
from harness.errors import StartFailure
from harness.merge.report import render
from harness.merge.spark import MergeError, hadoop_path, merge, session, spark_failure
from harness.plan.group import metrics_for
from harness.plan.run import RunSpec
from harness.rundir.live import LiveIntervals
from harness.rundir.sinks import Closed, Shown, Sink
from harness.rundir.writer import is_uri, make_run_dir, write_json_atomic
from harness.stats.intervals import RunStats
from harness.stats.records import SCHEMA_VERSION, event_record
from harness.stats.reports import IntervalReport
from harness.stats.slo import judged_exit
from harness.stats.views import IntervalView

HELLO_TIMEOUT_S = 120.0
# How far ahead the nodes are told to start: the message reaches them in milliseconds.
START_MARGIN_NS = 300_000_000
# A node silent this long after the start is lost (harness.distributed.node says it is alive
# every ALIVE_EVERY_S): a partition or a hung machine closes nothing, so only silence tells.
NODE_SILENCE_S = 10.0
# Once every other node has ended, how long a lost node's Spark task may take to end before
# the job is cancelled (a node cut off from the driver stops by itself when its link fails).
LOST_TASK_WAIT_S = 15.0
_NODE_ERROR = re.compile(r"harness-node: (.*)")


class _Node:
    def __init__(self, rank: int, name: str, link: Link) -> None:
        self.rank, self.name, self.link = rank, name, link
        self.offset_ns = 0
        self.rtt_ns = 0
        self.ready = False
        self.failed: str | None = None
        self.ended = False
        self.lost = False
        self.heard = time.monotonic()  # the last message from it
        self.last_index = -1
        self.exit_code = 0
        self.stopped_by = ""


class DistributedRun(LiveControls):
    """A run on N nodes of a Spark cluster, shown and stopped from here."""

    everywhere = " on every node"

    def __init__(self, run: RunSpec, cluster: ClusterSpec,
                 on_interval: Callable[[IntervalView], None], on_log: Callable[[str], None],
                 say: Callable[[str], None] = print) -> None:
        self.run = run
        self.cluster = cluster
        run.nodes = cluster.nodes
        self.on_interval = on_interval
        self.on_log = on_log
        self.say = say
        # Each merged interval goes to the interval lines or the live screen (on_interval,
        # which the screen may set later); the files are the nodes', merged at the end.
        self.sinks: list[Sink] = [Shown(lambda view: self.on_interval(view))]
        self.run_id = run.run_id or uuid.uuid4().hex[:12]
        self.started = time.time()
        # A Hadoop file system's URI (hdfs://, s3a://, file://): the run is put together in a
        # directory of this machine and copied there whole at the end.
        self.target = run.output if is_uri(run.output) else None
        staging = tempfile.mkdtemp(prefix="harness-run-") if self.target else run.output
        self.run_dir = make_run_dir(staging, run.name, self.started)
        self.location = f"{self.target.rstrip('/')}/{self.run_dir.name}" if self.target \
            else str(self.run_dir)
        self.metrics = {i: metrics_for(g) for i, g in enumerate(run.groups)}
        self.stats = RunStats(run, self.metrics)
        self.landing = Landing(self.run_dir / "nodes")
        self.nodes: dict[int, _Node] = {}
        self.inbox: queue.Queue[tuple[int, dict[str, Any] | None]] = queue.Queue()
        self.pending: dict[int, dict[str, list[IntervalReport]]] = {}
        self.next_index = 0
        self.start_s: float | None = None
        self.stop_at: float | None = None
        self.paused = False
        self.stop_requests = 0
        self.stop_reason = "interrupt"
        self.stops_sent = 0
        # What each node was given; its threads' rates, as the split gave them.
        self.each_node = node_spec(run, cluster.nodes, run.node, self.run_id).groups
        self.rates = [g.per_thread_rate for g in self.each_node]
        self.token = secrets.token_hex(16)
        self.spark: Any = None
        self.shipped: Path | None = None  # the zip of this harness sent to the executors
        self.job: threading.Thread | None = None
        self.results: list[dict[str, Any]] | None = None
        self.job_error: str | None = None
        self.waiting_since: float | None = None  # for lost nodes' tasks, the others ended
        self.cancelled = False  # the job, for lost nodes' tasks that did not end
        self.listener: socket.socket | None = None
        self.broker = psutil.Process(run.broker_pid) if run.broker_pid else None
        self.spark_seconds = 0.0
        self.live: LiveIntervals | None = None  # live.jsonl, while the run goes

    # -- set-up
    def prepare(self) -> None:
        """Start Spark, wait for the task slots, launch the barrier stage and wait until
        every node has connected and agreed on the start; StartFailure if one cannot."""
        cluster = self.cluster
        began = time.monotonic()
        self.say(f"starting Spark ({cluster.master})")
        self.spark = session(cluster.master, f"harness run {self.run_id}",
                             spark_conf(cluster, self.run.drain))
        slots = wait_for_slots(self.spark, cluster, self.say)
        self.spark_seconds = time.monotonic() - began
        self.say(f"Spark up in {self.spark_seconds:.1f} s: {slots} task slots for "
                 f"{cluster.nodes} nodes")
        if cluster.ship:
            self.shipped = harness_zip(Path(tempfile.mkdtemp(prefix="harness-ship-")) /
                                       "harness.zip")
            self.spark.sparkContext.addPyFile(str(self.shipped))
        self._check_executors()
        try:
            self.listener = socket.create_server(("127.0.0.1" if cluster.local else "",
                                                  cluster.driver_port))
        except OSError as exc:
            self._stop_spark()
            raise StartFailure(f"--driver-port: cannot listen on {cluster.driver_port} "
                               f"({exc.strerror or exc})") from None
        address = driver_address(self.spark, cluster, self.listener.getsockname()[1])
        threading.Thread(target=self._accept, name="node-listener", daemon=True).start()
        payload = NodePayload(self.run, self.run_id, cluster.nodes, address, self.token)
        self.job = threading.Thread(target=self._job, args=(payload,), name="spark-job",
                                    daemon=True)
        self.job.start()
        self._await_start()
        self._live_files()

    def _live_files(self) -> None:
        """The run directory's manifest and live.jsonl while it runs, read by `harness view
        --follow` and `harness serve`; the merge writes the run's own at the end."""
        write_json_atomic(self.run_dir / "manifest.json", {
            "schema": SCHEMA_VERSION, "run_id": self.run_id, "name": self.run.name,
            "node": "driver", "options": recorded_options(self.run), "created": self.started,
            "start": self.start_s, "status": "running",
            "distributed": {"nodes": self.cluster.nodes, "master": self.cluster.master}})
        self.live = LiveIntervals(self.run_dir, self.run_id, [g.name for g in self.run.groups])
        self.sinks.append(self.live)

    def _check_executors(self) -> None:
        """Refuse the run, before any node starts, where the executors' Python lacks what a
        node imports (the harness, its packages, a transport's client)."""
        transports = sorted({g.transport for g in self.run.groups})
        n = self.cluster.nodes
        try:
            found = self.spark.sparkContext.parallelize(range(n), n).map(
                functools.partial(executor_lacks, transports)).collect()
        except Exception as exc:  # the executors could not even unpickle the check
            found = [[spark_failure(exc).removeprefix("No module named ").strip("'")]]
        missing = sorted({name for each in found for name in each})
        if missing:
            self._stop_spark()
            packs = "".join(f" -t {t}" for t in transports if t not in ("loopback", "stomp",
                                                                          "mqtt"))
            raise StartFailure(
                f"--cluster: the executors' Python lacks {', '.join(missing)}: package them "
                f"with `harness package --spark DIR{packs}` and give the --spark-conf "
                "settings it prints" + ("" if self.cluster.ship else
                                        " (and --ship, which sends the harness itself)"))

    def _job(self, payload: NodePayload) -> None:
        sc = self.spark.sparkContext
        sc.setJobGroup(f"harness-{self.run_id}", f"harness run {self.run_id}")
        try:
            rdd = sc.parallelize(range(self.cluster.nodes), self.cluster.nodes)
            self.results = rdd.barrier().mapPartitions(
                functools.partial(node_main, payload)).collect()
        except BaseException as exc:  # the Spark job's failure, told by the run loop
            self.job_error = node_error(exc)
        self.inbox.put((-1, None))

    def _accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(Link(sock),), daemon=True).start()

    def _serve(self, link: Link) -> None:
        """One node's messages onto the run loop's queue; clock probes answered at once."""
        hello = link.receive()
        if not hello or hello.get("kind") != "hello" or hello.get("token") != self.token:
            link.close()
            return
        rank = int(hello["rank"])
        node = _Node(rank, str(hello["node"]), link)
        self.nodes[rank] = node
        for message in link.messages():
            node.heard = time.monotonic()
            if message.get("kind") == "clock":
                link.send({"kind": "clock", "driver": epoch_ns()})
            elif message.get("kind") != "alive":
                self.inbox.put((rank, message))
        self.inbox.put((rank, None))

    def _await_start(self) -> None:
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        n = self.cluster.nodes
        while True:
            decided = [x for x in self.nodes.values() if x.ready or x.failed is not None]
            if len(decided) == n:
                break
            if time.monotonic() > deadline:
                self._cancel()
                raise StartFailure(f"only {len(decided)} of {n} nodes reported within "
                                   f"{HELLO_TIMEOUT_S:g} s")
            try:
                rank, message = self.inbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if rank < 0:  # the job ended before every node started
                self._close()
                raise StartFailure(self.job_error or "the Spark job ended before the run began")
            if message is None:
                continue
            self._handle(rank, message)
        failed = [x for x in self.nodes.values() if x.failed is not None]
        if failed:
            self._close()
            refused = "; ".join(f"node {x.name}: {x.failed}" for x in
                                sorted(failed, key=lambda x: x.rank) if x.failed)
            raise StartFailure(refused or "a node could not start")
        start = epoch_ns() + START_MARGIN_NS
        self.start_s = start / 1e9
        for node in sorted(self.nodes.values(), key=lambda x: x.rank):
            node.link.send({"kind": "start", "at": start})
            node.heard = time.monotonic()
            self.say(f"  node {node.name}: clock offset {node.offset_ns / 1e6:+.3f} ms "
                     f"(round trip {node.rtt_ns / 1e6:.3f} ms)")
        # Each node's start is the driver's instant in its own clock, as well as its offset
        # is known: to within half the round trip its estimate came from.
        skew = max(x.rtt_ns for x in self.nodes.values()) / 2e6
        self.say(f"every node starts {START_MARGIN_NS / 1e6:.0f} ms from now by the driver's "
                 f"clock; start skew within {skew:.3f} ms")

    def execute(self) -> RunResult:
        """prepare() then measure(), with Ctrl-C and SIGTERM asking for the stop."""
        self.prepare()
        with Signals(self.request_stop):
            return self.measure()

    # -- messages from the nodes
    def _handle(self, rank: int, message: dict[str, Any]) -> None:
        node = self.nodes[rank]
        kind = message.get("kind")
        if kind == "file":
            self.landing.take(node.name, message)
        elif kind == "interval":
            reports = [report_from_wire(r) for r in message["reports"]]
            self.pending.setdefault(int(message["index"]), {})[node.name] = reports
            node.last_index = max(node.last_index, int(message["index"]))
        elif kind == "log":
            self.on_log(f"node {node.name}: {message['message']}")
        elif kind == "ready":
            node.offset_ns, node.rtt_ns = int(message["offset"]), int(message["rtt"])
            node.ready = True
        elif kind == "failed":
            node.failed = message.get("error") or ""
        elif kind == "end":
            node.ended = True
            node.exit_code = int(message["exit_code"])
            node.stopped_by = str(message["stopped_by"])

    # -- requests from outside the run loop (signals, the live screen)
    def request_stop(self, reason: str = "interrupt") -> None:
        """The first request stops every node gracefully, the second at once."""
        if self.stop_requests == 0:
            self.stop_reason = reason
        self.stop_requests += 1

    def _tell(self, message: dict[str, Any]) -> None:
        for node in list(self.nodes.values()):
            if not node.ended and not node.lost:
                with contextlib.suppress(OSError):  # a node gone: told by its reader
                    node.link.send(message)

    def _pause(self, paused: bool) -> None:
        self._tell({"kind": "pause", "paused": paused})
        self._event("pause", paused=paused)

    def _set_rate(self, g: int, factor: float) -> None:
        self._tell({"kind": "rate", "group": g, "factor": factor})
        self._event("set_rate", group=self.run.groups[g].name, rate_per_thread=self.rates[g])

    def _event(self, action: str, **detail: Any) -> None:
        """A live change, as the nodes record it, in the driver's live file."""
        if self.live is not None and self.start_s is not None:
            self.live.event(event_record(self.run_id, "driver", time.time() - self.start_s,
                                         action, **detail))

    def _threads(self, g: int) -> int:
        group = self.run.groups[g]
        return group.threads * group.processes * self.cluster.nodes

    def add_thread(self, g: int) -> str:
        return "t: threads cannot be added to a distributed run; start it with more -nt"

    # -- the run
    def measure(self) -> RunResult:
        assert self.start_s is not None
        while True:
            self._steer()
            self._watch()
            if self.job is not None and not self.job.is_alive() and self.inbox.empty() and \
                    all(x.ended or x.lost for x in self.nodes.values()):
                break
            try:
                rank, message = self.inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            if rank < 0:
                continue
            if message is None:
                self._gone(rank)
            else:
                self._handle(rank, message)
            self._emit()
        self._emit(flush=True)
        try:
            return self._finish()
        finally:
            self._stop_spark()

    def _steer(self) -> None:
        now = time.time()
        assert self.start_s is not None
        if self.stop_at is None and self.run.duration and now >= self.start_s + \
                self.run.duration:
            self.stop_at = self.start_s + self.run.duration
        while self.stops_sent < min(self.stop_requests, 2):
            self.stops_sent += 1
            self.stop_at = self.stop_at or now
            self._tell({"kind": "stop"})
            if self.stops_sent == 2:
                self.on_log("second interrupt: stopping every node at once and cancelling "
                            "the Spark job")
                self._cancel()

    def _watch(self) -> None:
        """Nodes silent too long are lost; the others go on. Once only lost nodes are left,
        their tasks get a while to end, then the job is cancelled."""
        now = time.monotonic()
        for node in list(self.nodes.values()):
            if not (node.ended or node.lost) and now - node.heard > NODE_SILENCE_S:
                node.lost = True
                assert self.start_s is not None
                self.on_log(f"node {node.name} lost {time.time() - self.start_s:.1f} s into the "
                            f"run: nothing from it for {now - node.heard:.0f} s (a network "
                            "partition or a hung machine); its intervals until then are kept, "
                            "the other nodes go on")
                node.link.close()
        if self.job is None or not self.job.is_alive() or self.cancelled:
            return
        nodes = list(self.nodes.values())
        if any(x.lost for x in nodes) and all(x.ended or x.lost for x in nodes):
            self.waiting_since = self.waiting_since or now
            if now - self.waiting_since > LOST_TASK_WAIT_S:
                self.cancelled = True
                self.on_log("cancelling the Spark job: the lost nodes' tasks have not ended")
                self._cancel()

    def _gone(self, rank: int) -> None:
        node = self.nodes[rank]
        if node.ended or node.lost:
            return
        node.lost = True
        assert self.start_s is not None
        self.on_log(f"node {node.name} lost {time.time() - self.start_s:.1f} s into the run "
                    "(its connection closed before its end): stopping the other nodes")
        if self.stop_requests == 0:
            self.stop_requests = 1

    def _emit(self, flush: bool = False) -> None:
        """Show every interval that every live node has reported, merged, in order."""
        assert self.start_s is not None
        while self.next_index in self.pending:
            index = self.next_index
            batch = self.pending[index]
            expected = {x.name for x in self.nodes.values()
                        if not x.lost and not (x.ended and x.last_index < index)}
            if not flush and not expected <= batch.keys():
                return
            reports = [r for part in batch.values() for r in part]
            start = min(r.start_ns for r in reports) / 1e9
            broker_cpu = self._broker_cpu()
            view = self.stats.merge(index, start - self.start_s, reports, broker_cpu)
            del self.pending[index]
            self.next_index += 1
            broker = None if broker_cpu is None or self.run.broker_pid is None else \
                (self.run.broker_pid, broker_cpu)
            closed = Closed(index, start, view, reports, None, broker)
            for sink in self.sinks:
                sink.interval(closed)

    # -- the end
    def _finish(self) -> RunResult:
        self._close(stop_spark=False)
        lost = [x.name for x in self.nodes.values() if x.lost]
        exit_code = max([x.exit_code for x in self.nodes.values()] + [1 if lost else 0])
        if self.stops_sent >= 2:
            exit_code = 130
        if self.job_error and not lost:
            self.on_log(f"the Spark job failed: {self.job_error}")
            exit_code = exit_code or 1
        inputs = self._node_dirs()
        stopped_by = ("second interrupt" if self.stops_sent >= 2 else
                      "node lost" if lost else
                      self.stop_reason if self.stop_reason != "interrupt" else
                      next((x.stopped_by for x in self.nodes.values() if x.stopped_by), ""))
        summary: dict[str, Any] = {}
        merged = None
        try:
            merged = merge(self._merging_spark(), inputs, str(self.run_dir),
                           say=lambda line: None)
            summary = merged.summary["runs"][self.run_id]
            for warning in merged.warnings:
                self.on_log(warning)
        except MergeError as exc:
            self.on_log("the merge failed: " + "; ".join(exc.problems))
            exit_code = exit_code or 1
            summary = self.stats.summary()
        summary.update(run_id=self.run_id, stopped_by=stopped_by, start=self.start_s,
                       nodes_lost=lost, complete=not lost and exit_code == 0,
                       spark_start_s=self.spark_seconds)
        summary["given"] = {"nodes": self.cluster.nodes, "master": self.cluster.master,
                            "each_node": {g.name: {"threads": g.threads * g.processes,
                                                   "thread_rate": g.per_thread_rate,
                                                   "messages": g.messages}
                                          for g in self.each_node}}
        for sink in self.sinks:
            sink.summarize(summary)
        exit_code = judged_exit(summary, exit_code)
        if merged is not None and summary.get("slo"):
            # The merge drew report.html before the thresholds were judged.
            merged.report["runs"][0]["slo"] = summary["slo"]
            (self.run_dir / "report.html").write_text(render(merged.report, "harness merge"))
        # The run directory's summary.json reads as a single run's does, with the nodes'.
        (self.run_dir / ".summary.json.crc").unlink(missing_ok=True)
        if merged is None:  # the manifest is still the one written at the start
            manifest = self.run_dir / "manifest.json"
            with contextlib.suppress(OSError, ValueError):
                write_json_atomic(manifest, {**json.loads(manifest.read_text()),
                                             "status": "incomplete"})
        write_json_atomic(self.run_dir / "summary.json", summary)
        if self.live is not None:  # after summary.json: a follower reads it to its end
            self.live.remove()
        run_dir = self.run_dir
        if self.target:
            try:
                copy_up(self.spark, self.run_dir, self.location)
                shutil.rmtree(self.run_dir.parent, ignore_errors=True)
                run_dir = Path(self.location)
            except Exception as exc:  # the Hadoop file system's error, in its own words
                self.on_log(f"cannot copy the run to {self.location} "
                            f"({node_error(exc)}); it is in {self.run_dir}")
                exit_code = exit_code or 1
        return RunResult(run_dir, summary, exit_code, stopped_by)

    def _merging_spark(self) -> Any:
        """The Spark that merges the nodes' files, which came over their links to this
        machine: the cluster's own where its executors are on this machine too, else an
        embedded one here, as `harness merge` runs (a cluster's executors elsewhere could
        neither read those files nor write the run directory here)."""
        if self.cluster.local:
            return self.spark
        self._stop_spark()
        hadoop = {k: v for k, v in self.cluster.conf.items() if k.startswith("spark.hadoop.")}
        # Its Python workers are this Python, whatever the cluster's executors ran
        # (PYSPARK_PYTHON, which Spark reads as the context starts).
        cluster_python = os.environ.get("PYSPARK_PYTHON")
        os.environ["PYSPARK_PYTHON"] = sys.executable
        try:
            self.spark = session("local[*]", f"harness run {self.run_id} merge", hadoop)
        finally:
            if cluster_python is None:
                del os.environ["PYSPARK_PYTHON"]
            else:
                os.environ["PYSPARK_PYTHON"] = cluster_python
        return self.spark

    def _node_dirs(self) -> list[str]:
        """Every node's run directory, as its files came over its link: a node lost on the
        way has its files up to its last interval."""
        return [str(path) for path in self.landing.nodes()]

    def _cancel(self) -> None:
        if self.spark is not None:
            self.spark.sparkContext.cancelJobGroup(f"harness-{self.run_id}")

    def _close(self, stop_spark: bool = True) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for node in self.nodes.values():
            node.link.close()
        if stop_spark and self.spark is not None:
            if self.job is not None and self.job.is_alive():
                self._cancel()
                self.job.join(10)
            self._stop_spark()

    def _stop_spark(self) -> None:
        """Spark stopped, and the zip it served to the executors deleted."""
        self.spark.stop()
        if self.shipped is not None:
            shutil.rmtree(self.shipped.parent, ignore_errors=True)
            self.shipped = None


def copy_up(spark: Any, local: Path, uri: str) -> None:
    """A directory of this machine, whole, to a path of any Hadoop file system."""
    fs, target = hadoop_path(spark, uri)
    _, source = hadoop_path(spark, local.resolve().as_uri())
    fs.copyFromLocalFile(False, True, source, target)


def node_error(exc: BaseException) -> str:
    """The one line a node failed with, out of Spark's long error; else its last line."""
    text = str(exc)
    found = _NODE_ERROR.findall(text)
    if found:
        return found[-1].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
