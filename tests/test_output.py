"""The run directory: manifest, intervals.jsonl, the .hlog and summary.json."""

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from harness.stats.histogram import decode
from harness.units import format_us


def test_hlog_reads_back_with_hdrhistogram_reader_identical_to_jsonl(harness):
    result = harness("run", "-m", "loopback.Sender", "-rt", "2000", "-d", "Q", "-rl", "3",
                     "-ss", "1", "-g", "-m loopback.Receiver -d Q", "--node", "nodeA")
    assert result.code == 0, result.stderr
    hlog = result.run_dir / "nodeA.hlog"
    header = hlog.read_text().splitlines()[:5]
    assert header[0] == "#[Histogram log format version 1.3]"
    assert header[1].startswith("#[StartTime: ")
    assert header[2].startswith("#[BaseTime: ")
    assert header[4] == '"StartTimestamp","Interval_Length","Interval_Max",' \
        '"Interval_Compressed_Histogram"'
    expected = [r for r in result.records("histogram")]
    reader = HistogramLogReader(str(hlog), HdrHistogram(1, 3_600_000_000, 3))
    read = []
    while (histogram := reader.get_next_interval_histogram()) is not None:
        read.append(histogram)
    assert len(read) == len(expected) > 0
    for histogram, row in zip(read, expected, strict=True):
        assert histogram.get_tag() == row["tag"]
        assert histogram.equals(decode(row["hist"]))
        assert histogram.get_total_count() == row["count"]
    assert {h.get_tag() for h in read} == {"sender.service", "sender.delay",
                                           "receiver.latency", "receiver.service"}
    # Lines carry the start relative to the base time and the interval length.
    line = next(x for x in hlog.read_text().splitlines() if x.startswith("Tag="))
    _, start, length, _, _ = line.split(",")
    assert float(start) == 0.0 and float(length) == 1.0


def test_manifest_and_jsonl_describe_the_run(harness):
    result = harness("run", "-m", "loopback.Sender", "-rt", "500", "-d", "Q", "-rl", "3",
                     "-sw", "1", "-ss", "1", "-n", "trial", "-g", "-m loopback.Receiver -d Q")
    assert result.code == 0, result.stderr
    assert result.run_dir.name.endswith("-trial")
    manifest = result.manifest
    assert manifest["status"] == "complete"
    assert manifest["warmup_end"] == manifest["start"] + 1
    assert manifest["host"]["cpus"] >= 1 and "hdrhistogram" in manifest["host"]["libraries"]
    assert manifest["options"]["groups"][0]["module"] == "loopback.Sender"
    counters = [r for r in result.records("counters") if r["group"] == "sender"]
    assert [r["phase"] for r in counters][:3] == ["warmup", "measure", "measure"]
    assert all(r["run"] == manifest["run_id"] for r in result.records())
    # Warm-up is written but left out of the summary.
    measured = sum(r["sent"] for r in counters if r["phase"] != "warmup")
    assert result.summary["groups"]["sender"]["sent"] == measured
    # 1,500 were due; the last, 2 ms before the stop, counts as unsent if the thread woke too
    # late to send it in time (a rate is what was sent).
    sender = result.summary["groups"]["sender"]
    assert sum(r["sent"] for r in counters) + sender["unsent"] == 1500 and sender["unsent"] <= 1
    assert sender["rate"] == measured / 2


def test_secrets_never_reach_the_manifest():
    from harness.rundir.writer import scrub
    cleaned = scrub({"host": "h", "passcode": "s3cret", "nested": [{"password": "x"}],
                     "token": "", "properties": {"Authorization": "Bearer b", "X-Api-Key": "k",
                                                 "Cookie": "c", "region": "eu"}})
    assert cleaned == {"host": "h", "passcode": "***", "nested": [{"password": "***"}],
                       "token": "", "properties": {"Authorization": "***", "X-Api-Key": "***",
                                                  "Cookie": "***", "region": "eu"}}


def test_a_password_never_appears_in_output_or_run_files(harness, brokers, tmp_path):
    # Mosquitto, which lets anonymous clients in: the password goes out and is not checked.
    secret = "s3cret-passw0rd-xyz"
    secret_file = tmp_path / "pw"
    secret_file.write_text("other-s3cret-from-file\n")
    result = harness("run", "-m", "mqtt.Publisher", "-d", "secret/t", "-mg", "10", "-ss", "1",
                     "--user", "u", "--password", secret, "-g",
                     f"-m mqtt.Subscriber -d secret/t --user u --password-file {secret_file}")
    assert result.code == 0, result.stderr
    everything = result.stdout + result.stderr + "".join(
        p.read_text() for p in result.run_dir.iterdir())
    assert secret not in everything and "other-s3cret-from-file" not in everything
    groups = result.manifest["options"]["groups"]
    assert groups[0]["password"] == groups[1]["password"] == "***"


def test_the_harness_floor_is_measured_through_the_run_and_written(loopback_run):
    floor = loopback_run.summary["floor"]
    assert loopback_run.manifest["floor"] == floor
    # About ten hand-offs a second over the 3 s run and its drain, in the one process.
    assert 25 <= floor["samples"] <= 55
    assert list(floor["processes"]) == ["0"]
    assert 0 < floor["p50"] <= floor["p99"] <= floor["max"]
    assert "harness floor: wake-up and thread hand-off p50" in loopback_run.stdout
    # Printed beside the latency it bounds, right under the summary table.
    receiver = loopback_run.summary["groups"]["receiver"]["latency"]["p50"]
    p50 = format_us(receiver)
    ratio = receiver / floor["p50"]
    # ... with a verdict: above the floor by 2x or more, or within it.
    verdict = "mostly the broker's and the network's time" if ratio >= 2 else \
        "within 2x: read it as largely the harness's own wake-up, not the broker's"
    assert f"(beside: receiver latency p50 {p50}, {ratio:.1f}x the floor" in \
        loopback_run.stdout
    assert verdict in loopback_run.stdout


def test_the_floor_verdict_says_which_side_of_twice_the_floor_a_latency_is():
    from harness.stats.figures import floor_verdict

    assert floor_verdict(1000, 100).startswith("10.0x the floor: mostly the broker's")
    assert floor_verdict(150, 100).startswith("1.5x the floor, within 2x: read it as largely")
    assert floor_verdict(50, 100).startswith("0.5x the floor, within 2x")


def test_a_run_directory_written_before_transport_options_stood_apart_reads_back(
        loopback_run, harness) -> None:
    """Manifests of earlier runs hold qos, keepalive ... among the group's fields."""
    import json

    from harness.rundir.reader import load

    path = loopback_run.run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    for group in manifest["options"]["groups"]:
        group.pop("options")
        group.update(qos=0, keepalive=60, heartbeat_ms=0)
    # ... and the loopback broker's run-wide options among the run's fields
    manifest["options"].pop("options")
    manifest["options"].update(loopback_capacity=1500.0, loopback_delay=0.0,
                               faults=[["drop", "Q", 3]])
    path.write_text(json.dumps(manifest))
    recorded = load(loopback_run.run_dir)
    assert recorded.run.groups[0].options == {"qos": 0, "keepalive": 60, "heartbeat_ms": 0}
    assert recorded.run.options == {"loopback_capacity": 1500.0, "loopback_delay": 0.0,
                                    "faults": [["drop", "Q", 3]]}
    viewed = harness("view", str(loopback_run.run_dir), "--no-ui", output=False)
    assert viewed.code == 0, viewed.stderr


def test_the_metrics_page_answers_from_the_start_and_its_address_is_said(tmp_path):
    """Before the first interval ends (a 3 s warm-up, 3 s intervals), the page already holds
    every group's counters at 0, and the run said where it serves them."""
    import subprocess
    import time
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from tests.conftest import env, free_port, harness_command

    port = free_port()
    proc = subprocess.Popen(harness_command(
        "run", "-m", "loopback.Sender", "-d", "Q", "-rt", "50", "-rl", "4", "-sw", "3", "-ss",
        "3", "--metrics-port", str(port), "-o", str(tmp_path)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env())
    try:
        deadline, page = time.monotonic() + 30, None
        while page is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    page = r.read().decode()
            except OSError:
                time.sleep(0.1)
        assert page, "the page never answered"
        assert not list(tmp_path.glob("*/intervals.jsonl")) or \
            '"counters"' not in next(tmp_path.glob("*/intervals.jsonl")).read_text()
        sent = {tuple(sorted(s.labels.items())): s.value
                for family in text_string_to_metric_families(page)
                for s in family.samples if s.name == "harness_messages_sent_total"}
        assert sent and set(sent.values()) == {0.0}, page
        assert all(dict(labels)["phase"] == "warmup" and dict(labels)["group"] == "sender"
                   for labels in sent)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert f"metrics: http://127.0.0.1:{port}/metrics (every counter at 0 until the first " \
           "interval ends)" in stderr
