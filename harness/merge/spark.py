"""The multi-node merge on Spark: reads the run directories of N nodes (or of a sweep) from
any path Spark reads, validates them, merges them exactly in the executors and writes
merged_intervals (parquet and CSV), merged.hlog, the merged run (intervals.jsonl and
manifest.json, which `harness view` replays), summary.json and report.html.

Every per-histogram step runs in the executors (harness.merge.core): the map side reads each
node's lines, the shuffle brings each range of interval slots to one task in order, and that
task merges slot after slot keeping running sums only. The executors write the rows (parquet,
CSV) and the text of merged.hlog and intervals.jsonl, in slot order, as part files that the
JVM then joins into one file; the driver receives only what is sized by the output: each
partition's statistics (a few histograms), the report's points (at most
harness.merge.core.MAX_POINTS a series), the nodes' sums and spans. Its memory does not grow
with the number of nodes or intervals.

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
from harness.merge.build import Gathered, Merged, merged_manifest, run_entry
from harness.merge.core import (
    LATENCY,
    ROW_COLUMNS,
    SKIPPED,
    Partial,
    RunLayout,
    figures_of,
    layouts_from,
    merge_slots,
    node_figures,
    read_lines,
)
from harness.merge.report import render
from harness.rundir.writer import hlog_header, is_uri
from harness.stats.counts import add_text
from harness.stats.histogram import decode, encode

# Input bytes a partition of the merge, about: a task's shuffle sort and slot merge stay
# within Python's default worker memory.
PARTITION_BYTES = 16 << 20




class MergeError(Exception):
    """Inputs that cannot be merged; each problem on a line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def read_manifests(spark: Any, inputs: list[str]) -> list[dict[str, Any]]:
    """Each input's manifest, with `_path` (the input), `_end` (epoch s of the last write to
    its intervals.jsonl: where a node that did not finish ended) and `_bytes`."""
    jvm = spark.sparkContext._jvm
    manifests = []
    for path in inputs:
        fs, target = hadoop_path(spark, _join(path, "manifest.json"))
        try:
            stream = fs.open(target)
            try:
                text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
            finally:
                stream.close()
        except Exception:
            raise MergeError([f"{path}: no manifest.json (not a run directory)"]) from None
        try:
            manifest = json.loads(text)
        except ValueError:
            raise MergeError([f"{path}/manifest.json is not JSON"]) from None
        if not isinstance(manifest, dict) or not {"run_id", "node", "options"} <= \
                manifest.keys():
            raise MergeError([f"{path}/manifest.json is not a harness manifest"])
        try:
            status = fs.getFileStatus(hadoop_path(spark, _join(path, "intervals.jsonl"))[1])
        except Exception:
            raise MergeError([f"{path}: no intervals.jsonl (not a run directory)"]) from None
        manifest.update(_path=path, _end=status.getModificationTime() / 1000,
                        _bytes=status.getLen())
        manifests.append(manifest)
    return manifests


def hadoop_path(spark: Any, path: str) -> tuple[Any, Any]:
    """(file system, path) of Hadoop's for any path it knows (local, hdfs://, s3a://)."""
    target = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
    return target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), target


def write_text(spark: Any, path: str, text: str) -> None:
    """A file at any path Hadoop's file systems know (local, hdfs://, s3a://)."""
    fs, target = hadoop_path(spark, path)
    fs.setWriteChecksum(False)
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
    # A relative path means the same place to the executors only if they share this
    # process's working directory, which a cluster's (local-cluster's too) never do.
    inputs, output = [absolute(path) for path in inputs], absolute(output)
    say(f"reading {len(inputs)} run director{'y' if len(inputs) == 1 else 'ies'}")
    manifests = read_manifests(spark, inputs)
    layouts, problems = layouts_from(manifests)
    runs = {m["run_id"] for m in manifests}
    if len(runs) > 1 and not sweep:
        problems.append("the inputs hold more than one run (" + ", ".join(sorted(runs)) +
                        "): nodes of one run share a run id (harness run --run-id); to merge "
                        "the runs of a sweep, each on its own, give --sweep")
    if problems:
        raise MergeError(problems)
    warnings = [f"run {run}: no intervals" for run in sorted(runs - layouts.keys())]
    summary: dict[str, Any] = {"runs": {}, "skipped": dict.fromkeys(SKIPPED, 0)}
    report: dict[str, Any] = {"runs": []}
    hlog: list[tuple[str, str, int]] = []  # (header, part files, their count) a run
    fs, parts = hadoop_path(spark, _join(output, "_parts"))
    fs.delete(parts, True)  # what a merge that failed left
    started = time.monotonic()
    for number, (run, layout) in enumerate(sorted(layouts.items())):
        say(f"run {run}: nodes {', '.join(m['node'] for m in layout.nodes)}, intervals of "
            f"{layout.interval:g} s")
        try:
            gathered = _merge_run(spark, layout, output, number, jsonl=len(layouts) == 1,
                                  say=say)
        except MergeError:
            raise
        except Exception as exc:
            if not _from_spark(exc):
                raise
            raise MergeError([f"run {run}: the Spark job failed: {spark_failure(exc)}"]) \
                from None
        hlog.append((hlog_header(layout.base_time, f"harness merge of run {run}, nodes "
                                 f"{', '.join(m['node'] for m in layout.nodes)}"),
                     _join(output, f"_parts/hlog-{number}"), layout.partitions))
        for kind, count in gathered.skipped.items():
            summary["skipped"][kind] += count
        entry, drawn = run_entry(layout, gathered, warnings, skew_warn_s)
        summary["runs"][run] = entry
        report["runs"].append(drawn)
        if len(layouts) == 1:
            write_text(spark, _join(output, "manifest.json"),
                       json.dumps(merged_manifest(layout), indent=1))
    skipped = summary["skipped"]
    say(f"merged in {time.monotonic() - started:.1f} s" + "".join(
        f"; skipped {v} {k.replace('_', ' ')}" for k, v in skipped.items() if v))
    warnings[:0] = [f"{count} {name.replace('_', ' ')} skipped"
                    for name, count in sorted(skipped.items()) if count]
    _join_parts(spark, hlog, _join(output, "merged.hlog"))
    fs.delete(parts, True)
    summary["warnings"] = report["warnings"] = warnings
    report["skipped"] = skipped
    write_text(spark, _join(output, "summary.json"), json.dumps(summary, indent=1, default=str))
    write_text(spark, _join(output, "report.html"), render(report, "harness merge"))
    return Merged(summary, report, warnings)


def _merge_run(spark: Any, layout: RunLayout, output: str, number: int, jsonl: bool,
               say: Callable[[str], None]) -> Gathered:
    """The number'th run merged in the executors; its rows, its .hlog part files and
    (jsonl) the merged run's intervals.jsonl written; returns what the driver gathers."""
    from pyspark import StorageLevel

    sc = spark.sparkContext
    size = sum(m["_bytes"] for m in layout.nodes)
    # Four partitions a core balance a large input's uneven slots; under a partition's worth
    # of bytes each core's one partition is done in moments, and every further task of each
    # of the merge's stages is a fixed cost.
    spread = 4 if size >= PARTITION_BYTES else 1
    layout.cut(max(spread * sc.defaultParallelism, size // PARTITION_BYTES))
    shipped = sc.broadcast(layout)
    parts = {"hlog": _join(output, f"_parts/hlog-{number}"),
             "jsonl": _join(output, "_parts/jsonl") if jsonl else None}
    # Executors of this machine (local[*], local-cluster) write the text parts of an
    # output on its file system straight from the tasks that make them; elsewhere they go
    # through Spark's committed writes, a second pass over what the tasks kept, to the
    # path the executors share (hdfs://, s3a://, a mount every machine has).
    direct = _local(output) is not None and str(sc.master).startswith("local")

    def read(path: str) -> Any:
        lines = sc.textFile(_join(path, "intervals.jsonl"))
        return lines.mapPartitions(lambda part: read_lines(part, path, shipped.value))

    def reduce(index: int, items: Any) -> Any:
        merged = merge_slots(items, shipped.value)
        if not direct:
            yield from merged
            return
        with PartFiles(index, parts) as files:
            for item in merged:
                if item[0] == "slot":
                    files.write("hlog", item[3])
                    files.write("jsonl", item[4])
                    item = (*item[:3], "", "")
                yield item

    partitions, cut = layout.partitions, layout.partition
    keyed = sc.union([read(m["_path"]) for m in layout.nodes])
    merged = keyed.repartitionAndSortWithinPartitions(partitions, cut) \
        .mapPartitionsWithIndex(reduce).persist(StorageLevel.MEMORY_AND_DISK)
    progress = _Progress(spark, say)
    progress.start()
    try:
        gathered = merged.filter(
            lambda item: item[0] not in ("slot", "node_sum", "partial")).collect()
        problems = [item[1:] for item in gathered if item[0] == "problem"]
        if problems:
            raise MergeError([_located(*p) for p in sorted(problems)[:10]])
        # The partitions' statistics added up in the executors: one reaches the driver.
        partial = merged.filter(lambda item: item[0] == "partial") \
            .map(lambda item: item[1]).treeReduce(_absorbed)
        # Each node's sums of the partitions added in the executors: the driver gets a
        # few figures per node and tag.
        per_node = node_figures(
            merged.filter(lambda item: item[0] == "node_sum")
            .map(lambda item: (item[1], item[2])).reduceByKey(_added)
            .mapValues(lambda text: figures_of(decode(text))).collect())
        slots = merged.filter(lambda item: item[0] == "slot")
        _write_rows(spark, slots.flatMap(lambda item: item[2]), output, append=number > 0)
        if not direct:
            for kind, at in ((3, parts["hlog"]), (4, parts["jsonl"])):
                if at is not None:
                    slots.map(lambda item, at=kind: item[at]).filter(bool).saveAsTextFile(at)
        if jsonl:
            _join_parts(spark, [("", parts["jsonl"], partitions)],
                        _join(output, "intervals.jsonl"))
    finally:
        progress.stopped.set()
        merged.unpersist()
    skipped = dict.fromkeys(SKIPPED, 0)
    reconcile: list[dict[str, Any]] = []
    for item in gathered:
        if item[0] == "skipped":
            for kind, count in item[1].items():
                skipped[kind] += count
        elif item[0] == "reconcile":
            reconcile += item[1]
    return Gathered(partial, per_node, reconcile, skipped)


class PartFiles:
    """A task's part files of the text outputs, in a directory each (kind -> directory,
    None: not written): written under a hidden name and renamed when the task ends, so
    that a task run twice leaves one whole part."""

    def __init__(self, index: int, directories: dict[str, str | None]) -> None:
        import os
        import uuid

        self.files: dict[str, Any] = {}
        self.names: dict[str, tuple[str, str]] = {}
        for kind, directory in directories.items():
            if directory is None:
                continue
            local = _local(directory)
            assert local is not None
            os.makedirs(local, exist_ok=True)
            final = os.path.join(local, f"part-{index:05d}")
            temporary = os.path.join(local, f".part-{index:05d}-{uuid.uuid4().hex}.tmp")
            self.names[kind] = (temporary, final)
            self.files[kind] = open(temporary, "w", encoding="utf-8")  # noqa: SIM115

    def write(self, kind: str, text: str) -> None:
        if text and kind in self.files:
            self.files[kind].write(text + "\n")

    def __enter__(self) -> PartFiles:
        return self

    def __exit__(self, kind: Any, *rest: Any) -> None:
        import os

        for name, file in self.files.items():
            file.close()
            temporary, final = self.names[name]
            if kind is None:
                os.replace(temporary, final)
            else:
                os.unlink(temporary)


def _absorbed(first: Partial, second: Partial) -> Partial:
    first.absorb(second)
    return first


def _added(first: str, second: str) -> str:
    histogram = decode(first)
    add_text(histogram, second)
    return encode(histogram)


def _from_spark(exc: BaseException) -> bool:
    """Raised by Spark's JVM or its Python workers (an input the executors cannot read, an
    executor lost), not by this process's own code."""
    return any(kind.__module__.startswith(("py4j", "pyspark")) for kind in type(exc).__mro__)


def spark_failure(exc: BaseException) -> str:
    """The innermost cause a Spark job failed with, in one line, out of its long error."""
    import re

    causes = re.findall(r"(?:Exception|Error): (\S.*)", str(exc).split("\tat ")[0])
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (causes[-1] if causes else lines[0] if lines else type(exc).__name__)[:300]


def absolute(path: str) -> str:
    """A path of this machine made absolute; a Hadoop URI as it is."""
    import os

    return path if is_uri(path) else os.path.abspath(path)


def _local(path: str) -> str | None:
    """The path on this machine's file system, None for another file system's URI."""
    if path.startswith("file://"):
        return path.removeprefix("file://")
    if path.startswith("file:"):
        return path.removeprefix("file:")
    return None if is_uri(path) else path


def _located(source: str, line: str, what: str) -> str:
    """A record's place as a line number, where the file is on this machine's disk."""
    import os

    path = _join(source, "intervals.jsonl")
    local = _local(path)
    if local is not None and os.path.isfile(local):
        with open(local, encoding="utf-8", errors="replace") as f:
            for number, text in enumerate(f, 1):
                if text.rstrip("\n") == line:
                    return f"{path}, line {number}: {what}"
    return f"{path}: {what} (a line beginning {line[:60]!r})"


def _write_rows(spark: Any, rows: Any, output: str, append: bool) -> None:
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType
    types = {"count": LongType(), "rate": DoubleType(), "t": DoubleType(),
             "interval_start": DoubleType(), **dict.fromkeys(LATENCY, LongType())}
    schema = StructType([StructField(c, types.get(c, StringType())) for c in ROW_COLUMNS])
    frame = spark.createDataFrame(rows, schema)
    mode = "append" if append else "overwrite"
    frame.write.mode(mode).parquet(_join(output, "merged_intervals.parquet"))
    # The CSV from the parquet just written: the rows are not merged a second time.
    spark.read.parquet(_join(output, "merged_intervals.parquet")).coalesce(1).write \
        .mode("overwrite").option("header", True).csv(_join(output, "merged_intervals.csv"))


def _part_files(spark: Any, parts: str, expected: int) -> list[Any]:
    """The part files of a directory in order; MergeError where the executors' parts are not
    all there to read (they wrote them where this machine does not see)."""
    fs, path = hadoop_path(spark, parts)
    files = sorted((status.getPath() for status in fs.listStatus(path)
                    if status.getPath().getName().startswith("part-")),
                   key=lambda p: p.getName()) if fs.exists(path) else []
    if len(files) != expected:
        raise MergeError([f"{parts}: {len(files)} of the executors' {expected} part files "
                          "are there to read: they wrote "
                          "them where this machine does not see; give an output on a file "
                          "system every machine of the cluster shares (hdfs://, s3a://, "
                          "a shared mount)"])
    return files


def _join_parts(spark: Any, pieces: list[tuple[str, str, int]], target: str) -> None:
    """One file of a text and a directory of `count` part files each, in order, joined by the JVM
    (the bytes never pass through Python). Every part is found before the file is made:
    a merge that cannot write it leaves none, never an empty one."""
    jvm = spark.sparkContext._jvm
    found = [(text, _part_files(spark, parts, count)) for text, parts, count in pieces]
    fs, path = hadoop_path(spark, target)
    fs.setWriteChecksum(False)
    out = fs.create(path, True)
    try:
        for text, files in found:
            if text:
                out.write(bytearray(text.encode("utf-8")))
            for part in files:
                parts_fs = part.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
                stream = parts_fs.open(part)
                try:
                    jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, out, 1 << 16, False)
                finally:
                    stream.close()
    finally:
        out.close()


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
