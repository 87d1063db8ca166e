"""The harness on a Spark cluster as its users meet one: a standalone cluster (a Master and a
Worker from the pip-installed pyspark, contrib/spark/standalone.sh) whose executors run a
Python that has PySpark and nothing else, the harness packaged for it by `harness package
--spark`, the bundled merge script submitted with the command its docstring gives, and the
readers of a run (merge, view, report, export, compare) with no broker client installed."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import ROOT, env, free_port, harness_command

WITHOUT_CLIENTS = [sys.executable, str(ROOT / "tests" / "without_clients.py")]


def pyspark_only_python(where: Path) -> Path:
    """A virtual environment whose Python has PySpark (and its py4j) only: the ones this
    suite installed, linked in, so that nothing is downloaded."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    ours = Path(sysconfig.get_paths()["purelib"])
    for name in ("pyspark", "py4j"):
        (site / name).symlink_to(ours / name)
    lacking = subprocess.run([str(python), "-c", "import numpy"], capture_output=True)
    assert lacking.returncode != 0  # it has no harness dependency
    return python


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(master URL, the PySpark-only Python, the package directory, environment)."""
    root = tmp_path_factory.mktemp("cluster")
    python = pyspark_only_python(root / "bare")
    port = free_port()
    script = ["bash", str(ROOT / "contrib" / "spark" / "standalone.sh")]
    spark_env = {**os.environ, "HARNESS_SPARK_PORT": str(port),
                 "HARNESS_SPARK_STATE": str(root / "spark"), "PYTHON": str(python)}
    packaged = subprocess.run(harness_command("package", "--spark", str(root / "pkg"), "-t",
                                              "amqp", "-t", "kafka"),
                              capture_output=True, text=True, env=env(), timeout=300)
    assert packaged.returncode == 0, packaged.stderr
    subprocess.run([*script, "start"], env=spark_env, check=True, timeout=120)
    try:
        yield (f"spark://127.0.0.1:{port}", python, root / "pkg",
               {**env(), "PYSPARK_PYTHON": str(python), "SPARK_LOCAL_IP": "127.0.0.1"},
               packaged.stdout)
    finally:
        subprocess.run([*script, "stop"], env=spark_env, check=True, timeout=60)


def two_nodes(tmp_path: Path, name: str, producer: str, consumer: str, *more: str) -> list[str]:
    """The run directories of two nodes of one run, started by hand at once."""
    run_id = f"{name}{time.time_ns() % 10**8}"
    procs = [subprocess.Popen(harness_command(
        "run", "-m", *producer.split(), "-rt", "100", "-g", consumer, "-rl", "2", "-ss", "1",
        "--drain", "2", "--node", node, "--run-id", run_id, "--nodes", "2", "--no-ui", *more,
        "-o", str(tmp_path / name / node)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env(), cwd=tmp_path) for node in ("a", "b")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    return [str(d) for node in ("a", "b") for d in (tmp_path / name / node).iterdir()]


def docstring_command() -> str:
    """The spark-submit command contrib/spark/merge.py's docstring gives, as one line."""
    text = (ROOT / "contrib" / "spark" / "merge.py").read_text()
    lines = text[text.index("PYTHONPATH="):].split("\n\n")[0]
    return " ".join(line.strip().rstrip("\\") for line in lines.splitlines())


def rows(output: Path) -> list[str]:
    (part,) = (output / "merged_intervals.csv").glob("part-*.csv")
    with part.open() as f:
        return sorted(json.dumps(row, sort_keys=True) for row in csv.DictReader(f))


def histograms(output: Path) -> list[str]:
    return sorted(line for line in (output / "merged.hlog").read_text().splitlines()
                  if line.startswith("Tag="))


def test_the_merge_script_submitted_to_a_pyspark_only_cluster_merges_as_harness_merge(
        cluster, brokers, tmp_path):
    master, _, pkg, spark_env, _ = cluster
    topic = f"submit{time.time_ns()}"
    # The four runs at once: each is two nodes of 2 s at 100 a second, mostly waiting.
    runs = [("loopback", "loopback.Sender -d Q", "-m loopback.Receiver -d Q"),
            ("mqtt", f"mqtt.Publisher -d {topic}", f"-m mqtt.Subscriber -d {topic}"),
            ("amqp", f"amqp.Sender -d {topic}", f"-m amqp.Receiver -d {topic}"),
            ("kafka", f"kafka.Sender -d {topic}", f"-m kafka.Receiver -d {topic} --port 9092",
             "--port", "9092")]
    with ThreadPoolExecutor(len(runs)) as pool:
        inputs = [d for dirs in pool.map(lambda r: two_nodes(tmp_path, *r), runs) for d in dirs]
    # The docstring's command, from the checkout's root (whose harness/ folder is the source
    # tree's), the package where `harness package --spark pkg` wrote it.
    command = docstring_command().replace("pkg/", f"{pkg}/").replace(
        "spark://HOST:7077", master).replace("NODE_RUN_DIR...", " ".join(inputs) + " --sweep") \
        .replace("OUT", str(tmp_path / "submitted"))
    spark_submit = Path(sysconfig.get_paths()["scripts"]) / "spark-submit"
    submitted = subprocess.run(["bash", "-c", command.replace("spark-submit",
                                                              str(spark_submit), 1)],
                               capture_output=True, text=True, env=spark_env, cwd=ROOT,
                               timeout=600)
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    # The same inputs merged by `harness merge`, on a machine with no broker client.
    merged = subprocess.run([*WITHOUT_CLIENTS, "merge", "--sweep", "-o",
                             str(tmp_path / "local"), *inputs],
                            capture_output=True, text=True, env=env(), timeout=600)
    assert merged.returncode == 0, merged.stderr
    ours, theirs = tmp_path / "submitted", tmp_path / "local"
    summary = json.loads((ours / "summary.json").read_text())
    assert summary == json.loads((theirs / "summary.json").read_text())
    assert len(summary["runs"]) == 4
    for run in summary["runs"].values():
        assert all(g.get("sent", 0) + g.get("received", 0) > 0 for g in run["groups"].values())
    assert histograms(ours) == histograms(theirs) and len(histograms(ours)) > 20
    assert rows(ours) == rows(theirs)
    # Every reader of a run works with no broker client: view, report, export, compare.
    mqtt_run = inputs[2]
    for args in (["view", "--no-ui", mqtt_run], ["report", mqtt_run, "-o",
                                                  str(tmp_path / "r.html")],
                 ["export", "-f", "csv", mqtt_run, "-o", str(tmp_path / "e.csv")],
                 ["compare", inputs[4], inputs[6], "-o", str(tmp_path / "c.html")]):
        read = subprocess.run([*WITHOUT_CLIENTS, *args], capture_output=True, text=True,
                              env=env(), timeout=120)
        assert read.returncode == 0, (args, read.stderr)
    # ... and the guard is real: a run cannot start without its client.
    refused = subprocess.run([*WITHOUT_CLIENTS, "run", "-m", "mqtt.Publisher", "-d", "x"],
                             capture_output=True, text=True, env=env(), timeout=60)
    assert refused.returncode == 2 and "needs the Python package paho" in refused.stderr


def test_a_distributed_run_on_pyspark_only_executors_is_refused_then_runs_packaged(
        cluster, brokers, tmp_path):
    master, _, _, spark_env, printed = cluster
    topic = f"bare{time.time_ns()}"
    run = ["run", "-m", "mqtt.Publisher", "-d", topic, "--rate", "100", "-g",
           f"-m mqtt.Subscriber -d {topic}", "-rl", "2", "-ss", "1", "--drain", "1",
           "--cluster", master, "--nodes", "2", "--spark-conf", "spark.executor.cores=1",
           "--spark-conf", "spark.executor.memory=1g", "--no-ui", "-o", str(tmp_path)]
    refused = subprocess.run(harness_command(*run), capture_output=True, text=True,
                             env=spark_env, timeout=300)
    assert refused.returncode != 0
    assert re.search(r"the executors' Python lacks .*(hdrh|numpy|orjson).*harness package "
                     r"--spark DIR", refused.stderr), refused.stderr
    assert not list(tmp_path.glob("*/nodes/*"))  # no node started
    # The settings `harness package` printed for a distributed run, as it printed them.
    flags = shlex.split(re.search(r"harness run \.\.\. --cluster MASTER (.*)", printed)[1])
    ran = subprocess.run(harness_command(*run, *flags), capture_output=True, text=True,
                         env=spark_env, timeout=300)
    assert ran.returncode == 0, ran.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "summary.json").exists()]
    groups = json.loads((run_dir / "summary.json").read_text())["groups"]
    assert groups["publisher"]["sent"] > 0
    assert groups["subscriber"]["received"] == 2 * groups["publisher"]["sent"]
