"""The merge on a real local SparkSession, the merged report in headless Chromium, and the
single-run report."""

from __future__ import annotations

import importlib.util
import json
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from hdrh.log import HistogramLogReader

from harness.merge.spark import MergeError, merge, session
from harness.plan.group import GroupSpec
from harness.plan.run import RunSpec
from harness.rundir.writer import RunWriter, write_json_atomic
from harness.stats.histogram import encode, new_histogram, percentiles
from harness.stats.recorder import COUNTERS
from harness.stats.records import SCHEMA_VERSION
from tests.browser import chart_pixels, chromium
from tests.conftest import java_total

INTERVAL = 1.0


@pytest.fixture(scope="module")
def spark() -> Any:
    spark = session("local[2]")
    yield spark
    spark.stop()


def write_node(root: Path, run_id: str, node: str, start: float, intervals: int,
               draw: Callable[[random.Random], int], seed: int, schema: int = SCHEMA_VERSION
               ) -> tuple[Path, list[int]]:
    """A node's run directory as the harness writes it: a receiver whose latency values
    come from draw(); returns the directory and every value recorded."""
    run_dir = root / node
    run_dir.mkdir(parents=True)
    run = RunSpec(groups=[GroupSpec("loopback.Receiver", "Q", name="receiver")],
                  interval=INTERVAL, node=node)
    write_json_atomic(run_dir / "manifest.json", {
        "schema": schema, "run_id": run_id, "node": node, "name": "synthetic",
        "options": run.to_dict(), "start": start, "host": {"hostname": node, "cpus": 2},
        "clock": {"offset_estimate_s": 0.0}, "status": "complete"})
    writer = RunWriter(run_dir, run_id, node, start)
    rng = random.Random(seed)
    values: list[int] = []
    for i in range(intervals):
        histogram = new_histogram()
        sample = [draw(rng) for _ in range(200)]
        for v in sample:
            histogram.record_value(v)
        values += sample
        base = {"v": SCHEMA_VERSION, "run": run_id, "node": node, "process": 0, "interval": i,
                "start": start + i * INTERVAL, "length": INTERVAL, "phase": "measure"}
        encoded = encode(histogram)
        writer.write_interval([
            {"type": "process", **base, "pid": 1, "cpu": 10.0 + i},
            {"type": "counters", **base, "group": "receiver", **dict.fromkeys(COUNTERS, 0),
             "received": 200, "threads": 1, "threads_up": 1, "clamped": 0},
            {"type": "histogram", **base, "group": "receiver", "tag": "receiver.latency",
             "count": 200, "max": histogram.get_max_value(), "hist": encoded}],
            [("receiver.latency", start + i * INTERVAL, INTERVAL, histogram.get_max_value(),
              encoded)])
    writer.close()
    return run_dir, values


def read_rows(spark: Any, out: Path) -> list[dict[str, Any]]:
    """The interval rows the merge wrote (parquet), as dicts."""
    return [row.asDict() for row in
            spark.read.parquet(str(out / "merged_intervals.parquet")).collect()]


DISTRIBUTIONS: list[Callable[[random.Random], int]] = [
    lambda r: int(r.expovariate(1 / 300)) + 1,
    lambda r: r.randint(50, 5000),
    lambda r: r.choice((100, 20_000)) + r.randint(0, 50),
    lambda r: int(r.lognormvariate(6, 1)) + 1,
    lambda r: 1000 + r.randint(0, 3),
]


def test_merged_percentiles_equal_one_histogram_of_every_value(spark: Any,
                                                                tmp_path: Path) -> None:
    inputs, union = [], new_histogram()
    for n, draw in enumerate(DISTRIBUTIONS):
        run_dir, values = write_node(tmp_path / "in", "r1", f"node{n}", 1_800_000_000.0, 6,
                                     draw, seed=n)
        inputs.append(str(run_dir))
        for v in values:
            union.record_value(v)
    merged = merge(spark, inputs, str(tmp_path / "out"), say=lambda _: None)
    tag = merged.summary["runs"]["r1"]["tags"]["receiver.latency"]
    assert tag["count"] == union.get_total_count() == 5 * 6 * 200
    expected = percentiles(union)
    assert {k: tag[k] for k in expected} == expected
    # Each interval as well: rows are the union of that interval across the five nodes.
    rows = [r for r in read_rows(spark, tmp_path / "out") if r["tag"] == "receiver.latency"]
    assert len(rows) == 6 and all(r["count"] == 1000 for r in rows)
    assert merged.summary["runs"]["r1"]["groups"]["receiver"]["received"] == 6000
    # The merged log is a standard HdrHistogram interval log whose histograms add up.
    reader = HistogramLogReader(str(tmp_path / "out" / "merged.hlog"), new_histogram())
    total = new_histogram()
    while (histogram := reader.get_next_interval_histogram()) is not None:
        total.add(histogram)
    assert percentiles(total) == expected


def test_nodes_started_at_different_offsets_share_one_grid(spark: Any,
                                                           tmp_path: Path) -> None:
    start = 1_800_000_100.0
    offsets = {"a": 0.0, "b": 0.3, "c": 2.4}  # c starts two intervals and a bit later
    inputs = [str(write_node(tmp_path, "r2", node, start + offset, 4,
                             lambda r: r.randint(100, 200), seed=1)[0])
              for node, offset in offsets.items()]
    merged = merge(spark, inputs, str(tmp_path / "out"), say=lambda _: None)
    written = read_rows(spark, tmp_path / "out")
    rows = sorted((r["interval_start"], r["count"]) for r in written)
    # a and b share slots 0-3; c's intervals (starting 2.4 s in) land on slots 2-5.
    assert rows == [(start + s, count) for s, count in
                    ((0, 400), (1, 400), (2, 600), (3, 600), (4, 200), (5, 200))]
    assert all(r["interval_start"] % INTERVAL == 0 for r in written)
    assert sorted(r["t"] for r in written) == [0, 1, 2, 3, 4, 5]
    cpu = merged.report["runs"][0]["cpu"]
    assert sorted(cpu) == ["a", "b", "c"] and [t for t, _ in cpu["c"]] == [2, 3, 4, 5]


def test_corrupt_inputs_are_counted_and_bad_sets_refused(spark: Any, tmp_path: Path) -> None:
    first, _ = write_node(tmp_path, "r3", "a", 1_800_000_200.0, 3, lambda r: 500, seed=1)
    second, _ = write_node(tmp_path, "r3", "b", 1_800_000_200.0, 3, lambda r: 700, seed=2)
    text = (first / "intervals.jsonl").read_text()
    (first / "intervals.jsonl").write_text(text + text.splitlines()[-1][:40])  # torn line
    lines = (second / "intervals.jsonl").read_text().splitlines()
    record = json.loads(lines[2])
    assert record["type"] == "histogram"
    record["hist"] = record["hist"][:12] + "!!!!" + record["hist"][16:]
    lines[2] = json.dumps(record)
    (second / "intervals.jsonl").write_text("\n".join(lines) + "\n")
    merged = merge(spark, [str(first), str(second)], str(tmp_path / "out"), say=lambda _: None)
    assert merged.summary["skipped"] == {"truncated_lines": 1, "corrupt_histograms": 1}
    assert "1 truncated lines skipped" in merged.warnings
    assert merged.summary["runs"]["r3"]["tags"]["receiver.latency"]["count"] == 5 * 200
    other, _ = write_node(tmp_path / "x", "r4", "c", 1_800_000_200.0, 1, lambda r: 1, seed=3)
    old, _ = write_node(tmp_path / "y", "r3", "d", 1_800_000_200.0, 1, lambda r: 1, seed=3,
                        schema=99)
    cases = {"more than one run": [first, other], "given twice": [first, first],
             "schema version 99": [first, old], "no manifest.json": [first, tmp_path / "z"]}
    for message, paths in cases.items():
        with pytest.raises(MergeError, match=message):
            merge(spark, [str(p) for p in paths], str(tmp_path / "bad"), say=lambda _: None)


def test_the_merge_cli_on_two_real_loopback_runs_and_its_report_inchromium(
        harness: Any, tmp_path: Path) -> None:
    runs = []
    for node in ("a", "b"):
        done = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "300", "-rl", "3",
                       "-ss", "1", "--run-id", "twonode", "--node", node, "-o",
                       str(tmp_path / node), "-g", "-m loopback.Receiver -d Q", output=False)
        assert done.code == 0, done.stderr
        (run_dir,) = (tmp_path / node).iterdir()
        runs.append(run_dir)
    out = tmp_path / "merged"
    done = harness("merge", *map(str, runs), "-o", str(out), timeout=300)
    assert done.code == 0, done.stderr
    assert "spark:" not in done.stderr.lower() and "WARN" not in done.stderr
    assert "run twonode: nodes a, b" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    sent = sum(json.loads((r / "summary.json").read_text())["groups"]["sender"]["sent"]
               for r in runs)
    assert summary["runs"]["twonode"]["groups"]["sender"]["sent"] == sent
    assert list((out / "merged_intervals.parquet").glob("*.parquet"))
    [csv_file] = (out / "merged_intervals.csv").glob("*.csv")
    assert csv_file.read_text().splitlines()[0].startswith("run,interval_start,t,phase,tag")
    # The merged run replays like any run: harness view reads the merge's output.
    shown = harness("view", str(out))
    assert shown.code == 0, shown.stderr
    assert f"received {summary['runs']['twonode']['groups']['receiver']['received']}" in \
        shown.stdout
    page = out / "report.html"
    html = page.read_text()
    # Self-contained: nothing that could fetch (the only URL is the SVG namespace's name).
    for fetching in ("<script", "<link", "src=", "href=", "url(", "@import"):
        assert fetching not in html, fetching
    console = chromium(page, tmp_path / "report.png")
    assert console == []
    assert chart_pixels(tmp_path / "report.png") > 2000
    # The checks can fail: a page with a script error is caught, an empty one has no lines.
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>throw new Error('x')</script></body></html>")
    assert chromium(bad, tmp_path / "bad.png")
    assert chart_pixels(tmp_path / "bad.png") == 0


def test_report_for_a_single_run_without_spark(harness: Any, loopback_run: Any) -> None:
    done = loopback_run
    report = harness("report", str(done.run_dir))
    assert report.code == 0, report.stderr
    html = (done.run_dir / "report.html").read_text()
    summary = done.summary
    p50 = summary["groups"]["receiver"]["latency"]["p50"]
    from harness.units import format_us
    assert "receiver.latency" in html and f"<td>{format_us(p50)}</td>" in html
    assert html.count("<svg") >= 4


def bench(name: str) -> Any:
    """A script of contrib/bench as a module."""
    path = Path(__file__).resolve().parent.parent / "contrib" / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_merge_of_many_nodes_holds_the_driver_to_a_bounded_memory(spark: Any,
                                                                    tmp_path: Path) -> None:
    """24 nodes x 150 intervals x 12 tags (43,200 histogram rows): the driver held a
    decoded histogram per node, interval and tag before (about 14 GB here)."""
    nodes, intervals = 24, 150
    bench("merge").generate(tmp_path / "in", nodes, intervals)
    me = psutil.Process()
    before = me.memory_info().rss
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.05):
            peak = max(peak, me.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        merged = merge(spark, sorted(str(p) for p in (tmp_path / "in").iterdir()),
                       str(tmp_path / "out"), say=lambda _: None)
    finally:
        done.set()
        sampler.join()
    assert (peak - before) / 2**20 < 300, (before, peak)
    run = merged.summary["runs"]["bench"]
    measured = intervals - intervals // 10
    assert run["groups"]["sender1"]["sent"] == nodes * measured * 200
    assert run["groups"]["receiver3"]["received"] == nodes * measured * 200
    assert len(run["per_node"]) == nodes
    assert all(run["per_node"][n]["receiver1.latency"]["count"] > 0 for n in run["per_node"])
    # Every slot's rows, in order, one per tag.
    rows = read_rows(spark, tmp_path / "out")
    assert len(rows) == intervals * 12
    # Each histogram the nodes wrote holds 200 values.
    assert sum(r["count"] for r in rows if r["tag"] == "receiver2.latency") == \
        nodes * intervals * 200
    assert {n["receiver2.latency"]["count"] for n in run["per_node"].values()} == \
        {measured * 200}


def test_a_record_without_a_required_field_stops_the_merge_naming_file_line_and_field(
        spark: Any, tmp_path: Path) -> None:
    first, _ = write_node(tmp_path, "r5", "a", 1_800_000_300.0, 3, lambda r: 500, seed=1)
    second, _ = write_node(tmp_path, "r5", "b", 1_800_000_300.0, 3, lambda r: 700, seed=2)
    path = second / "intervals.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[4])
    del record["group"]
    lines[4] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MergeError) as caught:
        merge(spark, [str(first), str(second)], str(tmp_path / "out"), say=lambda _: None)
    assert caught.value.problems == [
        f"{path}, line 5: a {record['type']} record without the field 'group'"]
    assert not (tmp_path / "out" / "summary.json").exists()


def test_an_interval_cut_at_the_stop_and_the_drains_first_on_one_slot_both_count(
        spark: Any, tmp_path: Path) -> None:
    """A node stopped 0.45 s into an interval: that interval and its first of the drain
    begin 0.45 s apart and fall on one slot of the grid; each keeps its phase and counts."""
    start, node = 1_800_000_500.0, "b"
    run_dir = tmp_path / node
    run_dir.mkdir()
    run = RunSpec(groups=[GroupSpec("loopback.Receiver", "Q", name="receiver")],
                  interval=INTERVAL, node=node)
    write_json_atomic(run_dir / "manifest.json", {
        "schema": SCHEMA_VERSION, "run_id": "r6", "node": node, "name": "cut",
        "options": run.to_dict(), "start": start, "host": {}, "status": "complete"})
    writer = RunWriter(run_dir, "r6", node, start)
    shapes = [(0.0, 1.0, "measure"), (1.0, 0.45, "measure"), (1.45, 1.0, "drain")]
    histogram = new_histogram()
    histogram.record_value(100)
    for index, (offset, length, phase) in enumerate(shapes):
        base = {"v": SCHEMA_VERSION, "run": "r6", "node": node, "process": 0,
                "interval": index, "start": start + offset, "length": length, "phase": phase}
        writer.write_interval([
            {"type": "process", **base, "pid": 1, "cpu": 1.0},
            {"type": "counters", **base, "group": "receiver", **dict.fromkeys(COUNTERS, 0),
             "received": 10 + index, "threads": 1, "threads_up": 1, "clamped": 0},
            {"type": "histogram", **base, "group": "receiver", "tag": "receiver.latency",
             "count": 1, "max": 100, "hist": encode(histogram)}], [])
        writer.close_interval(index, start + offset, phase, 1.0, None, [])
    writer.close()
    merged = merge(spark, [str(run_dir)], str(tmp_path / "out"), say=lambda _: None)
    receiver = merged.summary["runs"]["r6"]["groups"]["receiver"]
    assert receiver["received"] == 10 + 11 + 12
    assert merged.summary["runs"]["r6"]["measured_seconds"] == pytest.approx(1.45)
    assert receiver["latency"]["max"] == 100
    assert merged.summary["runs"]["r6"]["tags"]["receiver.latency"]["count"] == 3


def test_hdrhistogram_reference_reader_adds_each_tag_up_to_the_summary(harness, spark,
                                                                        tmp_path):
    """The .hlog of a run with a warm-up and a drain, and the merged.hlog of its merge, read
    by the Java reference implementation: each plain tag's total is the summary's count
    (the measured span and the drain); the warm-up's are under tags of their own."""
    from hdrh.histogram import HdrHistogram

    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "400", "-rl", "5",
                     "-sw", "2", "-ss", "1", "--drain", "2", "--no-ui",
                     "-g", "-m loopback.Receiver -d Q", timeout=120)
    assert result.code == 0, result.stderr
    merged = tmp_path / "merged"
    merge(spark, [str(result.run_dir)], str(merged), say=lambda _: None)
    (hlog,) = result.run_dir.glob("*.hlog")
    text = hlog.read_text()
    assert "#[Phase: measure from 2.000 s" in text and "#[Phase: drain from" in text
    groups = result.summary["groups"]
    checked = 0
    for group, metrics in (("sender", ("service", "delay")), ("receiver", ("latency",))):
        for metric in metrics:
            expected = HdrHistogram.decode(groups[group]["histograms"][metric])
            for log in (hlog, merged / "merged.hlog"):
                tag = f"{group}.{metric}"
                assert java_total(log, tag, tmp_path / tag) == expected.get_total_count() > 0
                assert java_total(log, f"{tag}.warmup", tmp_path / "w") > 0
                checked += 1
    assert checked == 6
