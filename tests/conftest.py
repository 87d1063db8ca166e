"""Helpers for running the real `harness` command and reading what it wrote."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Every Spark the tests start (in this process, a harness run's, spark-submit's) reads the
# suite's defaults: tests/spark/spark-defaults.conf says why.
os.environ.setdefault("SPARK_CONF_DIR", str(ROOT / "tests" / "spark"))

# The quick tier (`make test-quick`: -m "not servers and not spark and not slow") leaves out
# every test that needs a broker or another server, every one that starts Spark or builds the
# wheel, and the longest runs.
SERVER_MODULES = {"test_amqp", "test_fault_matrix", "test_http", "test_mqtt", "test_nats",
                  "test_redis", "test_restart", "test_stomp", "test_tls", "test_websockets"}
# Tests of other modules that start a private server of their own (Tansu behind a proxy).
SERVER_TESTS = {"test_a_send_no_broker_answers_is_in_doubt_after_send_timeout"}
SPARK_MODULES = {"test_bench", "test_distributed", "test_distributed_stops", "test_install",
                 "test_merge", "test_spark_submit"}
SPARK_TESTS = {"test_a_merged_run_of_nodes_started_apart_keeps_each_nodes_phases",
               "test_each_merge_in_the_manual_merges_node_runs_and_is_viewed"}
# The whole suite (contrib/setup/test.sh) runs these alone, one test at a time: they time
# the machine (its CPU, a paced schedule) or wait on a broker's timing (a Kafka consumer
# group forms in seconds on Tansu, more beside another test's load; Prometheus scrapes each
# interval of a run within a second), or send as fast as a client can.
ALONE_MODULES = {"test_cpu", "test_pacing", "test_kafka", "test_prometheus",
                 # waits timed to a fraction of a millisecond
                 "test_waits"}
ALONE_TESTS = {"test_a_window_of_unacknowledged_sends_is_held_as_given",
               # each failed beside another test's load in a whole-suite run here
               "test_a_subscriber_the_server_cuts_off_as_slow_is_reported_with_its_loss",
               "test_an_http_server_lost_mid_run_is_a_connect_error_not_a_timeout",
               "test_stop_screenshot_reset_and_selection",
               "test_what_a_dead_receiver_held_is_redelivered_and_counted",
               # each step's rate to the digit
               "test_a_stepped_runs_report_draws_rate_against_latency_in_chromium",
               # a 5 ms wait a message, slept: a paced rate beside the rest falls short
               "test_a_consumer_latency_of_5ms_caps_a_consumer_thread_near_200_a_second",
               # each interval's count of a consumer paced at 200 a second, behind RabbitMQ:
               # a consumer that finds nothing waiting banks no time, so a stall of the
               # shared broker or of the machine beside the rest is a short interval never
               # made up, as the option promises (contrib/bench/RESULTS.md)
               "test_a_slow_consumer_on_rabbitmq_leaves_the_rest_in_the_queue_and_loses_nothing"}
# ... and these two at a time, each module on one worker, beside nothing else: they load the
# machine (Spark's driver and executors, the fault matrix's dozens of runs and servers, the
# wire test's ten runs at once, a wheel built), which the paced tests of the rest would feel,
# but time nothing finer than seconds themselves.
PAIRED_MODULES = {"test_distributed", "test_distributed_stops", "test_install", "test_merge",
                  "test_spark_submit", "test_fault_matrix"}
PAIRED_TESTS = {*SPARK_TESTS, "test_the_benchmark_runs_at_a_tiny_size[distributed.py]",
                "test_every_accepted_option_shows_on_the_wire",
                # ten runs at once, read by promtool: nothing timed but their pages' seconds
                "test_every_transports_endpoint_passes_promtool_while_its_roles_run"}
# The whole suite's parallel parts hand out tests a few at a time, these first, longest
# first (the times of a whole-suite run here), so that the workers end together: handed out
# by module, the fault matrix's tests all sat on one worker, and a long test handed out last
# keeps one worker going alone (contrib/bench/RESULTS.md has the figures). By test name, or
# by module where its tests go as one piece (PAIRED_WHOLE).
LONGEST_FIRST = (
    # paired
    "test_every_transport_rides_out_a_partition", "test_spark_submit",
    "test_every_accepted_option_shows_on_the_wire",
    "test_every_transport_rides_out_a_crash_of_its_server", "test_merge",
    "test_every_transport_rides_out_a_cut_connection", "test_install",
    # the rest
    "test_the_base_search_finds_the_highest_passing_base",
    "test_a_run_and_its_replay_hold_the_same_memory_for_100_and_1000_intervals",
    "test_the_benchmark_runs_at_a_tiny_size[kafka.py]",
    "test_a_search_finds_the_knee_of_a_simulated_broker",
    "test_a_client_certificate_logs_in_on_every_rabbitmq_protocol",
    "test_the_benchmark_runs_at_a_tiny_size[transports.py]",
    "test_a_redis_groups_lag_and_a_stream_readers_unread_entries",
    "test_runs_are_listed_newest_first_filtered_and_as_scripts_read_them",
    "test_the_benchmark_runs_at_a_tiny_size[merge.py]",
    "test_jetstream_redelivers_what_a_killed_consumer_held_and_counts_it",
    "test_a_killed_consumers_pending_messages_are_claimed_and_counted",
    "test_a_publish_the_users_permissions_forbid_is_refused_in_the_brokers_words",
    "test_a_run_started_with_serve_opens_its_own_page")
# The paired modules whose tests run on one worker, as one piece: they share a module
# fixture that is slow to make (a Spark session, a standalone cluster, the built wheel).
PAIRED_WHOLE = {"test_merge", "test_spark_submit", "test_install"}
# Pages rendered in headless Chromium, which the suite's set-up installs: out of the quick
# tier, which installs nothing.
BROWSER_TESTS = {"test_a_stepped_runs_report_draws_rate_against_latency_in_chromium",
                 "test_a_trend_page_draws_each_run_names_line_in_chromium",
                 "test_compare_draws_runs_on_shared_axes_labelled_by_what_differs"}
# Runs of several seconds each (over 4 s on a 2-core machine): the quick tier leaves them
# out too (-m "not slow") so that it stays under 3 minutes.
SLOW_TESTS = {
    # the manual's loopback runs, each for real, a few seconds each
    "test_each_loopback_run_in_the_manual_runs",
    # every subcommand on every kind of bad file: sixty commands, a second each
    "test_every_command_refuses_a_bad_file_in_one_line",
    "test_every_reader_of_runs_refuses_a_bad_run_directory_in_one_line",
    # eighteen profiles checked one after another: the whole suite's, not the quick tier's
    "test_check_prints_the_plan_of_every_shipped_profile_and_connects_to_nothing",
    "test_randomized_payloads_and_a_backlog_run_as_omb_means_them",
    "test_a_1000_per_second_run_holds_the_rate_every_second_and_does_not_drift",
    "test_a_consumer_at_500_behind_a_producer_at_1000_builds_500_a_second",
    "test_consumers_held_until_the_backlog_then_drain_it",
    "test_a_consumer_latency_of_5ms_caps_a_consumer_thread_near_200_a_second",
    "test_a_stepped_run_gives_each_step_its_rate_and_percentiles",
    "test_a_thread_held_in_a_send_past_the_stop_keeps_what_it_counted",
    "test_runs_are_listed_newest_first_filtered_and_as_scripts_read_them",
    "test_view_follow_shows_a_run_of_another_process_as_it_goes_then_its_summary",
    "test_a_loopback_run_meets_the_horizontal_mix_and_completes_every_chain",
    "test_a_loopback_sweep_writes_the_results_table",
    "test_a_low_paced_rate_is_its_own_rate_to_the_digit",
    "test_a_record_of_a_later_version_is_refused_by_its_version",
    "test_a_record_without_a_required_field_is_named_by_file_line_and_field",
    "test_a_refresh_tick_after_the_screen_closed_draws_nothing_and_raises_nothing",
    "test_a_run_and_its_replay_hold_the_same_memory_for_100_and_1000_intervals",
    "test_a_run_directory_written_before_transport_options_stood_apart_reads_back",
    "test_a_search_finds_the_knee_of_a_simulated_broker",
    "test_a_version_1_run_is_read_with_the_counters_it_lacks_as_zero",
    "test_a_workload_runs_as_its_groups_and_exports_as_omb_result_json",
    "test_an_overloaded_run_fails_because_its_queues_grow",
    "test_bad_input_is_one_line_naming_the_flag",
    "test_broker_cpu_and_cpu_ms_per_message",
    "test_competing_consumers_are_balanced_per_destination",
    "test_flags_beside_a_workload_reach_its_groups_or_are_refused",
    "test_freeform_runs_only_the_interactions_asked_for",
    "test_help_texts_have_no_line_breaks_mid_sentence",
    "test_hlog_reads_back_with_hdrhistogram_reader_identical_to_jsonl",
    "test_injected_faults_are_counted_exactly",
    "test_loss_at_the_head_of_a_stream_is_counted",
    "test_loss_at_the_tail_of_a_stream_shows_in_the_delivery_check",
    "test_loss_is_counted_once_in_a_results_table",
    "test_manifest_and_jsonl_describe_the_run",
    "test_merged_histogram_equals_the_union_of_the_processes_histograms",
    "test_no_garbage_collection_walks_more_than_an_interval_of_survivors",
    "test_one_thread_holds_100000_per_second_every_second_without_drift",
    "test_pause_holds_the_producers_and_resumes_without_a_burst",
    "test_ramp_and_poisson_pacing_run",
    "test_rate_keys_and_added_threads_reach_the_workers",
    "test_rates_are_the_paced_rate_whatever_the_run_length_warmup_and_interval",
    "test_screen_shows_the_numbers_the_statistics_engine_produced",
    "test_sigkill_leaves_complete_parseable_files",
    "test_stop_screenshot_reset_and_selection",
    "test_the_base_search_finds_the_highest_passing_base",
    "test_the_harness_floor_is_measured_through_the_run_and_written",
    "test_the_vertical_topology_is_mostly_point_to_point",
    "test_twenty_threads_at_50_per_second_measure_as_one_at_1000",
    "test_view_prints_the_recorded_intervals_without_a_terminal",
    # a run in another process followed, steered and stopped (tests/test_watching.py)
    "test_the_control_socket_takes_the_keys_and_only_its_user_may_open_it",
    "test_view_follow_shows_a_run_of_another_process_steers_it_then_replays_it",
    "test_a_run_without_control_is_followed_and_its_keys_say_why_not",
    "test_view_warns_of_a_line_cut_off_mid_write",
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "servers: needs a broker or another real server")
    config.addinivalue_line("markers", "spark: starts Spark (or builds and installs the wheel)")
    config.addinivalue_line("markers", "slow: a run of several seconds")
    config.addinivalue_line("markers", "alone: runs with no other test beside it")
    config.addinivalue_line("markers", "paired: runs beside one other such test only")
    config.addinivalue_line("markers", "browser: renders a page in headless Chromium")


def module_of(item: pytest.Item) -> str:
    return item.module.__name__.rpartition(".")[2] if item.module else ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = module_of(item)
        if module in SERVER_MODULES or item.originalname in SERVER_TESTS or \
                "brokers" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.servers)
        if module in SPARK_MODULES or item.originalname in SPARK_TESTS:
            item.add_marker(pytest.mark.spark)
        if item.originalname in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        if item.originalname in BROWSER_TESTS:
            item.add_marker(pytest.mark.browser)
        if item.originalname in PAIRED_TESTS or item.name in PAIRED_TESTS:
            item.add_marker(pytest.mark.paired)
        elif module in ALONE_MODULES or item.originalname in ALONE_TESTS or \
                item.name in ALONE_TESTS:
            item.add_marker(pytest.mark.alone)
        elif module in PAIRED_MODULES:
            item.add_marker(pytest.mark.paired)
        if module in PAIRED_WHOLE:
            item.add_marker(pytest.mark.xdist_group(module))

    def first(item: pytest.Item) -> int:
        for place, name in enumerate(LONGEST_FIRST):
            if name in (item.name, item.originalname, module_of(item)):
                return place
        return len(LONGEST_FIRST)

    items.sort(key=first)  # stable: the rest keep their order


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str
    run_dir: Path | None

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        assert self.run_dir is not None
        rows = read_jsonl(self.run_dir / "intervals.jsonl")
        return [r for r in rows if kind is None or r["type"] == kind]

    @property
    def summary(self) -> dict[str, Any]:
        assert self.run_dir is not None
        return json.loads((self.run_dir / "summary.json").read_text())

    @property
    def manifest(self) -> dict[str, Any]:
        assert self.run_dir is not None
        return json.loads((self.run_dir / "manifest.json").read_text())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line must be a complete JSON object: a torn line fails the test."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def harness_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", *args]


# The password tests pass by environment variable, MQTT_SECRET (anonymous brokers ignore it)
SECRET = "not-a-real-secret"


def env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "MQTT_SECRET": SECRET}


def command_line(process: Any) -> str:
    """A child that has already exited (Spark's short-lived helpers) has no command line."""
    import psutil

    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def watched(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str, set[str]]:
    """Wait for proc (a harness command), reading the command line of every process it
    starts meanwhile (its worker processes and threads, Spark's JVMs and executors, the
    nodes' processes) every tenth of a second: its output, and each command line seen."""
    import psutil

    lines: set[str] = set()
    root = psutil.Process(proc.pid)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with contextlib.suppress(psutil.Error):
                lines.update(command_line(p) for p in [root, *root.children(recursive=True)])
            try:  # reads the output meanwhile, which a full pipe would otherwise block
                stdout, stderr = proc.communicate(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(proc.args, timeout) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    lines.discard("")
    return stdout, stderr, lines


def assert_secret_kept(secret: str, args: tuple[str, ...], stdout: str, stderr: str,
                       lines: set[str], run_dir: Path | None) -> None:
    """The secret given by environment or file is in nothing the run printed or wrote, nor,
    unless the test itself put it on the command line, in any process's command line."""
    assert secret not in stdout + stderr, "the secret in the run's output"
    if not any(secret in arg for arg in args):
        showing = [line[:200] for line in lines if secret in line]
        assert not showing, f"the secret on a command line: {showing}"
    if run_dir is not None:
        for path in run_dir.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


def java_total(hlog: Path, tag: str, out: Path) -> int:
    """HdrHistogram's reference log processor (Debian's libhdrhistogram-java) adding up one
    tag of a log: its total count."""
    done = subprocess.run(["java", "-cp", "/usr/share/java/hdrhistogram.jar",
                           "org.HdrHistogram.HistogramLogProcessor", "-i", str(hlog), "-tag",
                           tag, "-o", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(re.search(r"Total count\s*=\s*(\d+)", Path(f"{out}.hgrm").read_text())[1])


def only_run_dir(output: Path) -> Path | None:
    dirs = [p for p in output.iterdir() if p.is_dir()] if output.exists() else []
    assert len(dirs) <= 1, dirs
    return dirs[0] if dirs else None


@pytest.fixture
def harness(tmp_path: Path):
    """Run `harness run ...` (or any subcommand) to completion, output under tmp_path."""

    def run(*args: str, timeout: float = 120, output: bool = True) -> Finished:
        """Every run is watched for the suite's secret (env()): in no output, file or
        command line of any process the run starts."""
        out = tmp_path / "runs"
        extra = ["-o", str(out)] if output and args and args[0] == "run" else []
        proc = subprocess.Popen(harness_command(*args, *extra), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                env=env(), cwd=tmp_path)
        stdout, stderr, lines = watched(proc, timeout)
        run_dir = only_run_dir(out)
        assert_secret_kept(SECRET, args, stdout, stderr, lines, run_dir)
        return Finished(proc.returncode, stdout, stderr, run_dir)

    return run



def login_runs(harness: Any, tmp_path: Path, login: list[str], secret: str,
               timeout: float = 90) -> Any:
    """For a test against a server of its own that asks for a login: run(*args, login=...)
    makes a short run logged in with the test's flags (or others given), each in an output
    of its own, checks that the secret is in nothing it printed, and returns the run and its
    summary (None where the run wrote none)."""

    def run(*args: str, login: list[str] | tuple[str, ...] = tuple(login)
            ) -> tuple[Finished, dict[str, Any] | None]:
        out = tmp_path / unique("login")
        done = harness("run", *args, *login, "-rl", "2", "-sw", "0", "-ss", "1", "-o",
                       str(out), timeout=timeout, output=False)
        assert secret not in done.stdout + done.stderr and "Traceback" not in done.stderr
        run_dir = only_run_dir(out)
        summary = run_dir / "summary.json" if run_dir else None
        return done, json.loads(summary.read_text()) if summary and summary.exists() else None

    return run

# Real brokers, started by the project's own script (tests never skip for a missing broker).
BROKERS = {
    "activemq": {"stomp": ["--port", "61613", "--flavour", "activemq"],
                 "mqtt": ["--port", "1884", "--flavour", "activemq"]},
    "rabbitmq": {"stomp": ["--port", "61614", "--flavour", "rabbitmq", "--vhost", "/"],
                 "mqtt": ["--port", "1885", "--flavour", "rabbitmq"],
                 "amqp": ["--port", "5672"],
                 "amqp10": ["--port", "5672", "--flavour", "rabbitmq"]},
    "mosquitto": {"mqtt": ["--port", "1883", "--flavour", "mosquitto"]},
}


@pytest.fixture(scope="session")
def brokers():
    import fcntl
    # One test process at a time (pytest-xdist starts several): two scripts starting the
    # same server at once would each find it not yet up.
    with open(Path(os.environ.get("TMPDIR", "/tmp")) / "harness-brokers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["bash", str(ROOT / "contrib" / "brokers" / "brokers.sh"), "start"],
                       check=True, timeout=900)
        shared_brokers_ready()
    before = set(rabbitmq_queues())
    yield BROKERS
    # Durable queues outlive the tests that made them: without this, every run of the suite
    # left some thirty in RabbitMQ. Beside other test processes (pytest-xdist), only the
    # queues named after names this process made, so that another's are left alone.
    delete_rabbitmq_queues({q for q in set(rabbitmq_queues()) - before if ours(q)})


def shared_brokers_ready() -> None:
    """The script waits for ports; the tests need more: a plugin just enabled on a running
    RabbitMQ (as the script does on a new machine) takes connections before subscriptions.
    Each endpoint the tests subscribe through, subscribed once (tests/ready.py), so that the
    first test to use one does not pay its warm-up either."""
    from tests.ready import mqtt_subscribes, stomp_subscribes, wait_ready

    guest = ("guest", "guest")
    for what, probe in (
            ("Mosquitto MQTT 1883", mqtt_subscribes("127.0.0.1", 1883)),
            ("ActiveMQ STOMP 61613", stomp_subscribes("127.0.0.1", 61613)),
            ("ActiveMQ MQTT 1884", mqtt_subscribes("127.0.0.1", 1884)),
            ("RabbitMQ STOMP 61614", stomp_subscribes("127.0.0.1", 61614, login=guest)),
            ("RabbitMQ MQTT 1885", mqtt_subscribes("127.0.0.1", 1885, login=guest)),
            ("RabbitMQ STOMP over WebSockets 15674",
             stomp_subscribes("127.0.0.1", 15674, "/ws", login=guest)),
            ("RabbitMQ MQTT over WebSockets 15675",
             mqtt_subscribes("127.0.0.1", 15675, "/ws", login=guest))):
        wait_ready(what, probe)


# Every name unique() made in this process; under pytest-xdist, what a test process cleans
# up from a shared server is what bears one of its names.
MADE: list[str] = []


def ours(name: str, since: int = 0) -> bool:
    """Whether a queue or key is this process's to delete: one named after a name unique()
    made (since MADE[since]). Never every queue new since the process began, even with no
    pytest-xdist worker beside it: another test process may be running on the same brokers
    (a test run by hand beside the suite deleted a queue under the suite's AMQP 1.0
    receiver, and RabbitMQ's plugin then dropped the receiver's connection)."""
    return any(name.startswith(made) for made in MADE[since:])


def rabbitmq_queues() -> dict[str, tuple[str, int]]:
    """name -> (type, messages) of every queue, as RabbitMQ lists them."""
    out = subprocess.run(["rabbitmqctl", "-q", "list_queues", "name", "type", "messages"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    queues = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[2].isdigit():
            queues[parts[0]] = (parts[1], int(parts[2]))
    return queues


def delete_rabbitmq_queues(names: set[str]) -> None:
    import pika
    import pika.exceptions
    if not names:
        return
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    try:
        channel = connection.channel()
        for name in sorted(names):
            try:
                channel.queue_delete(name)
            except pika.exceptions.ChannelClosed as exc:  # another connection's, already gone
                print(f"conftest: queue {name} left in RabbitMQ: {exc}", file=sys.stderr)
                channel = connection.channel()
    finally:
        connection.close()


@pytest.fixture(scope="session", autouse=True)
def _kafka_topics_deleted() -> Any:
    """The Kafka topics the session's tests made, deleted from the shared broker at its end:
    Tansu keeps every message in memory, and a broker holding a few suites' worth (3 GB)
    answered request/reply seconds late."""
    yield
    import contextlib
    import socket

    made = {n for m in MADE for n in (m, m.replace(".", "-"))}
    try:
        socket.create_connection(("127.0.0.1", 9092), timeout=1).close()
        from confluent_kafka.admin import AdminClient
    except (OSError, ImportError):
        return
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:9092"})
    with contextlib.suppress(Exception):
        doomed = sorted(set(admin.list_topics(timeout=10).topics) & made)
        for future in admin.delete_topics(doomed, operation_timeout=10).values() \
                if doomed else ():
            with contextlib.suppress(Exception):
                future.result(20)


def unique(prefix: str) -> str:
    """A destination name no other test (or earlier run) has used."""
    import uuid
    MADE.append(f"{prefix}.{uuid.uuid4().hex[:10]}")
    return MADE[-1]


@pytest.fixture
def loopback_run(harness):
    """A finished 3 s loopback run (a sender at 200 msg/s and a receiver), 1 s intervals."""
    done = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "200", "-rl", "3",
                   "-ss", "1", "-g", "-m loopback.Receiver -d Q")
    assert done.code == 0, done.stderr
    return done


def free_port() -> int:
    """A port nothing listens on, below the kernel's range of ephemeral ports (32768 up):
    a port the kernel handed out would be free now and could be another process's source
    port by the time a private server binds it (a RabbitMQ node failed to start so,
    dist_port_already_used, beside the fault matrix's many connections)."""
    import random

    for _ in range(200):
        port = random.randrange(10_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port between 10000 and 32000")


def wait_for_port(port: int, seconds: float = 10, host: str = "127.0.0.1") -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {host}:{port} after {seconds:g} s")


def make_certificates(folder: Path) -> None:
    """A CA of the test's own (ca.pem) and a server certificate it signed for 127.0.0.1
    (server.pem, server.key), made with openssl in folder."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=harness test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "server.key", "-out", "server.csr")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem")


def make_client_certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A client certificate for common name `name`, signed by make_certificates' CA in
    folder: (certificate, key)."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout",
            f"{name}.key", "-out", f"{name}.csr")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem")
    return folder / f"{name}.pem", folder / f"{name}.key"


def settings_for(module: str, **given: Any) -> Any:
    """What one transport instance of module is given, from options by key (a profile's
    keys, underscores allowed), built the way a run builds it."""
    from harness.plan.group import group_spec
    keys = {key.replace("_", "-"): value for key, value in given.items()}
    return group_spec({"module": module, "name": "t", **keys}).settings("test", 0, 0)


def beside_a_killed_consumer(tmp_path: Path, victim: list[str], main: list[str]
                             ) -> tuple[dict[str, Any], str]:
    """Run `main` (harness run arguments) while a second consumer of the same destination,
    `victim`, runs in a process group of its own and dies: frozen first, so that what the
    broker hands it meanwhile is never acknowledged (a consumer that hangs and is killed),
    then killed. (main's summary.json, its stdout) once main has ended successfully."""
    import signal
    import time
    dead = subprocess.Popen(harness_command("run", *victim, "-rl", "30", "-o",
                                            str(tmp_path / "victim")),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(),
                            cwd=tmp_path, start_new_session=True)
    try:
        # Running and subscribed: its first interval written (fixed sleeps froze a victim
        # that had taken nothing yet, beside the suite's load).
        written(tmp_path / "victim", r'"type":"counters"')
        proc = subprocess.Popen(harness_command("run", *main, "-o", str(tmp_path / "main")),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env(), cwd=tmp_path)
        # Frozen once it has taken messages, and a moment after, holding what came since.
        written(tmp_path / "victim", r'"type":"counters".*"received":[1-9]')
        time.sleep(1)
        os.killpg(dead.pid, signal.SIGSTOP)
        time.sleep(0.5)
        os.killpg(dead.pid, signal.SIGKILL)  # the run and its worker processes
        dead.wait()
        out, err = proc.communicate(timeout=120)
    finally:
        dead.kill()
        dead.wait()
    assert proc.returncode == 0, err
    run_dir = only_run_dir(tmp_path / "main")
    assert run_dir is not None
    return json.loads((run_dir / "summary.json").read_text()), out


def near(counts: list[int], rate: float, within: float) -> bool:
    """Whether intervals' counts come to `rate` an interval over their span, to the fraction
    `within`: a paced run held a moment by a busy machine sends what was due in the next
    interval, so that one interval is short and the next over."""
    expected = rate * len(counts)
    return abs(sum(counts) - expected) <= within * expected


def written(out: Path, pattern: str, seconds: float = 60) -> None:
    """Until a run under `out` has written an interval line matching pattern (read as it
    is written, a line at a time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for path in out.glob("*/intervals.jsonl"):
            if re.search(pattern, path.read_text()):
                return
        time.sleep(0.1)
    raise AssertionError(f"no interval line matching {pattern} under {out} in {seconds} s")


def redelivered_beside_a_killed_receiver(tmp_path: Path, module: str, queue: str,
                                         receiver: list[str], sender: list[str]) -> dict[str, Any]:
    """A `module` Sender and Receiver (with their flags) on queue, beside a second receiver
    that freezes and dies holding messages (beside_a_killed_consumer): what it held comes to
    the survivor marked by the broker and counted as redelivered, and what the survivor missed
    is what the victim acknowledged before it froze. main's summary.json."""
    summary, out = beside_a_killed_consumer(
        tmp_path, ["-m", f"{module}.Receiver", "-d", queue, *receiver],
        ["-m", f"{module}.Sender", "-d", queue, *sender, "-rl", "6", "-ss", "1", "--drain", "8",
         "-g", " ".join([f"-m {module}.Receiver -d", queue, *receiver])])
    sent, got = summary["groups"]["sender"], summary["groups"]["receiver"]
    assert got["redelivered"] > 0, "the killed receiver held nothing"
    assert f"receiver: {got['redelivered']} messages redelivered" in out
    assert got["errors"] == 0, [line for line in out.splitlines() if "err" in line]
    (delivery,) = summary["delivery"]
    assert got["received"] - got["duplicated"] + delivery["missing"] == sent["sent"]
    return summary


def manual_block(needle: str, language: str = "python") -> str:
    """The code block of the manual's extending page, in `language`, that holds `needle`,
    as the page has it (its list's indent taken off)."""
    page = (ROOT / "contrib" / "docs" / "docs" / "extending.md").read_text()
    block = re.search(rf"```{language}\n((?:(?!```).)*{re.escape(needle)}(?:(?!```).)*)```",
                      page, re.DOTALL)
    assert block, f"the worked example holding {needle!r} left the extending page"
    return "\n".join(line.removeprefix("   ") for line in block.group(1).splitlines()) + "\n"


def memory_example_ran(runs: Path) -> None:
    """The manual's example transport's run (-rt 200 for 2 s, a Sender and a Receiver) as
    it should be: every message sent arrived."""
    (run_dir,) = runs.iterdir()
    groups = json.loads((run_dir / "summary.json").read_text())["groups"]
    assert groups["sender"]["sent"] == pytest.approx(400, abs=2)
    assert groups["receiver"]["received"] == groups["sender"]["sent"]
    assert groups["receiver"]["lost"] == 0


def run_manual_example(name: str, module: str, prelude: str, args: list[str],
                       where: Path) -> subprocess.CompletedProcess[str]:
    """The code block of the manual's extending page that defines class `name`, as the page
    has it, saved as `module`.py in `where`; then `harness` with `args`, in a process that
    first runs `prelude` (the registration the page asks for) with `where` on its path."""
    (where / f"{module}.py").write_text(manual_block(f"class {name}"))
    script = f"import sys; {prelude}; from harness.cli.app import main; " \
        "sys.argv[0] = 'harness'; main()"
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=120, cwd=where,
                          env={**os.environ, "PYTHONPATH": str(where)})
