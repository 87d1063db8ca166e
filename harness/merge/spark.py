"""The multi-node merge on Spark: reads the run directories of N nodes (or of a sweep) from
any path Spark reads, validates them, merges them exactly in the executors and writes
merged_intervals (parquet and CSV), summary.json, merged.hlog and report.html.

Raw interval records never reach the driver: each partition folds its lines into partial
histograms and counter sums (harness.mergecore), the executors add up every key's parts, and
only the merged aggregates (one per interval slot and tag) are collected to build the
outputs.

Run by `harness merge` on an embedded local[*] Spark, or on a cluster by
contrib/spark/merge.py under spark-submit.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from harness.errors import BadInput
from harness.merge.build import ROW_COLUMNS, Merged, build
from harness.merge.core import fold_partition, layout_from, merge_values
from harness.merge.report import render

PROBLEM_KINDS = ("truncated_lines", "corrupt_histograms", "other_schema")
LATENCY_COLUMNS = ("p50", "p90", "p99", "p99.9", "max")


class MergeError(Exception):
    """Inputs that cannot be merged; each problem on a line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def read_manifests(spark: Any, inputs: list[str]) -> list[dict[str, Any]]:
    manifests = []
    for path in inputs:
        try:
            [(_, text)] = spark.sparkContext.wholeTextFiles(_join(path, "manifest.json")).collect()
        except Exception:
            raise MergeError([f"{path}: no manifest.json (not a run directory)"]) from None
        try:
            manifest = json.loads(text)
        except ValueError:
            raise MergeError([f"{path}/manifest.json is not JSON"]) from None
        manifest["_path"] = path
        manifests.append(manifest)
    return manifests


def hadoop_path(spark: Any, path: str) -> tuple[Any, Any]:
    """(file system, path) of Hadoop's for any path it knows (local, hdfs://, s3a://)."""
    target = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
    return target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), target


def write_text(spark: Any, path: str, text: str) -> None:
    """A file at any path Hadoop's file systems know (local, hdfs://, s3a://)."""
    fs, target = hadoop_path(spark, path)
    stream = fs.create(target, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


class _Progress(threading.Thread):
    """Prints the running Spark stage's task count while the merge works."""

    def __init__(self, spark: Any, say: Callable[[str], None]) -> None:
        super().__init__(daemon=True, name="merge-progress")
        self.tracker = spark.sparkContext.statusTracker()
        self.say = say
        self.stopped = threading.Event()

    def run(self) -> None:
        last = ""
        while not self.stopped.wait(1.0):
            for stage_id in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(stage_id)
                if info is None:
                    continue
                text = f"  stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks"
                if text != last:
                    self.say(text)
                    last = text


def merge(spark: Any, inputs: list[str], output: str, sweep: bool = False,
          skew_warn_s: float = 0.001, say: Callable[[str], None] = print) -> Merged:
    if not inputs:
        raise BadInput("RUN_DIR", "give at least one run directory")
    say(f"reading {len(inputs)} run director{'y' if len(inputs) == 1 else 'ies'}")
    manifests = read_manifests(spark, inputs)
    layout, problems = layout_from(manifests)
    if len(layout) > 1 and not sweep:
        problems.append("the inputs hold more than one run (" + ", ".join(sorted(layout)) +
                        "): nodes of one run share a run id (harness run --run-id); to merge "
                        "the runs of a sweep, each on its own, give --sweep")
    if problems:
        raise MergeError(problems)
    for run, entry in sorted(layout.items()):
        say(f"run {run}: nodes {', '.join(m['node'] for m in entry['nodes'])}, intervals of "
            f"{entry['interval']:g} s")
    sc = spark.sparkContext
    counters = {name: sc.accumulator(0) for name in PROBLEM_KINDS}
    shipped = sc.broadcast({run: {"interval": e["interval"]} for run, e in layout.items()})

    def fold(lines: Any) -> Any:
        local: dict[str, int] = {}
        yield from fold_partition(lines, shipped.value, local)
        for name, count in local.items():
            counters[name].add(count)

    lines = sc.textFile(",".join(_join(p, "intervals.jsonl") for p in inputs))
    progress = _Progress(spark, say)
    progress.start()
    started = time.monotonic()
    try:
        folded = dict(lines.mapPartitions(fold).groupByKey().mapValues(merge_values)
                      .collect())
    finally:
        progress.stopped.set()
    skipped = {name: acc.value for name, acc in counters.items()}
    say(f"merged in {time.monotonic() - started:.1f} s" + "".join(
        f"; skipped {v} {k.replace('_', ' ')}" for k, v in skipped.items() if v))
    merged = build(folded, layout, skipped, skew_warn_s)
    write(spark, merged, output)
    return merged


def write(spark: Any, merged: Merged, output: str) -> None:
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType
    types = {"count": LongType(), "rate": DoubleType(), "t": DoubleType(),
             "interval_start": DoubleType(), **dict.fromkeys(LATENCY_COLUMNS, LongType())}
    schema = StructType([StructField(c, types.get(c, StringType())) for c in ROW_COLUMNS])
    rows = [tuple(_cast(c, r[c]) for c in ROW_COLUMNS) for r in merged.rows]
    frame = spark.createDataFrame(rows, schema)
    frame.write.mode("overwrite").parquet(_join(output, "merged_intervals.parquet"))
    frame.coalesce(1).write.mode("overwrite").option("header", True) \
        .csv(_join(output, "merged_intervals.csv"))
    write_text(spark, _join(output, "summary.json"),
               json.dumps(merged.summary, indent=1, default=str))
    write_text(spark, _join(output, "merged.hlog"), merged.hlog)
    write_text(spark, _join(output, "report.html"), render(merged.report, "harness merge"))
    if merged.manifest is not None:  # harness view replays it like any run
        write_text(spark, _join(output, "intervals.jsonl"), "".join(
            json.dumps(r, separators=(",", ":")) + "\n" for r in merged.intervals))
        write_text(spark, _join(output, "manifest.json"), json.dumps(merged.manifest, indent=1))


def _cast(column: str, value: Any) -> Any:
    if value is None:
        return None
    if column in ("rate", "t", "interval_start"):
        return float(value)
    if column == "count" or column in LATENCY_COLUMNS:
        return int(value)
    return str(value)


def session(master: str = "local[*]", app: str = "harness merge",
            conf: dict[str, str] | None = None) -> Any:
    """An embedded Spark for `harness merge` (and a distributed run's driver): no UI,
    loopback networking unless told otherwise, and its log in <tmp>/harness-spark.log
    instead of the console. conf: further Spark settings, which win."""
    import os
    import sys
    import tempfile

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    settings = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                "spark.sql.session.timeZone": "UTC", **(conf or {})}
    # The JVM inherits this process's stderr when it starts: point it at a log file for that
    # moment, so that Spark's start-up chatter and later log lines stay out of the console.
    log_path = os.path.join(tempfile.gettempdir(), "harness-spark.log")
    saved = os.dup(2)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log_fd, 2)
        builder = SparkSession.builder.master(master).appName(app)
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log_fd)
    spark.sparkContext.setLogLevel("ERROR")
    return spark
