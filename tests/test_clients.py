"""Many clients on one worker thread (--clients): each client its own connection, producer
stream and schedule; connections timed and paced."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import ROOT, env, harness_command, only_run_dir, unique
from tests.servers import Mosquitto


def counters(result, group):  # type: ignore[no-untyped-def]
    return [r for r in result.records("counters") if r["group"] == group]


def histogram_counts(result, tag):  # type: ignore[no-untyped-def]
    return [r["count"] for r in result.records("histogram") if r["tag"] == tag]


def test_ten_clients_on_one_thread_measure_as_ten_threads(harness, tmp_path):
    """The same group as ten threads and as ten clients of one thread: the same sends in
    every measured second, ten producer streams each whole at the subscriber (streams that
    shared a producer id or numbers would show as duplicates), every message timed."""
    results = {}
    for how in (["-nt", "10"], ["--clients", "10"]):
        out = tmp_path / how[0].strip("-")
        result = harness("run", "-m", "loopback.Publisher", "-d", "T", "--rate", "200", *how,
                         "-g", "-m loopback.Subscriber -d T", "-rl", "4", "-sw", "1", "-ss",
                         "1", "-o", str(out), output=False)
        assert result.code == 0, result.stderr
        results[how[0]] = replace(result, run_dir=only_run_dir(out))
    for how, result in results.items():
        groups = result.summary["groups"]
        publisher, subscriber = groups["publisher"], groups["subscriber"]
        measured = [r["sent"] for r in counters(result, "publisher") if r["phase"] == "measure"]
        assert measured == [200, 200, 200], how
        assert publisher["sent"] == 600, how
        # Received in the measured span: to within a message of the warm-up's arriving
        # after its end (beside another test's load); the delivery check below is exact.
        assert subscriber["received"] == pytest.approx(600, abs=3), how
        assert subscriber["lost"] == subscriber["duplicated"] == subscriber["reordered"] == 0
        assert sum(histogram_counts(result, "subscriber.latency")) >= 600
        delivery = result.summary["delivery"][0]
        assert delivery["missing"] == delivery["duplicated"] == 0
        assert delivery["expected"] == delivery["received"] > 600
    clients = counters(results["--clients"], "publisher")
    assert {(r["threads"], r["clients"], r["clients_up"]) for r in clients} == {(1, 10, 10)}
    assert "clients" not in counters(results["-nt"], "publisher")[0]
    # Connections are timed only where clients are apart from threads.
    assert sum(histogram_counts(results["--clients"], "publisher.connect")) == 10
    assert "publisher.connect" not in {r["tag"] for r in results["-nt"].records("histogram")}


def test_clients_connect_at_the_connect_rate_and_send_once_connected(harness):
    """50 clients at 25 connections a second: two seconds of connecting, each timed, the
    group's connected clients counted each interval, and a client sends only once it is
    connected (the first second sends about half of what the later ones do)."""
    result = harness("run", "-m", "loopback.Publisher", "-d", "T", "--clients", "50", "-nt",
                     "2", "--connect-rate", "25", "--rate", "50", "-g",
                     "-m loopback.Subscriber -d T", "-rl", "4", "-sw", "0", "-ss", "1")
    assert result.code == 0, result.stderr
    connects = histogram_counts(result, "publisher.connect")
    assert sum(connects) == 50
    assert 20 <= connects[0] <= 30 and 20 <= connects[1] <= 30, connects
    assert connects[2:] == [0] * len(connects[2:])
    rows = counters(result, "publisher")
    up = [r["clients_up"] for r in rows]
    assert 20 <= up[0] <= 30 and up[2] == 50, up
    sent = [r["sent"] for r in rows if r["phase"] == "measure"]
    assert sent[0] < 35 and sent[2] == sent[3] == 50, sent
    summary = result.summary["groups"]["publisher"]
    assert summary["connects"] == 50 and summary["clients"] == 50
    assert summary["connect"]["p99"] is not None
    assert "50 connections" in result.stdout
    assert result.summary["delivery"][0]["missing"] == 0


@pytest.mark.parametrize(("args", "flag", "says"), [
    (["-m", "loopback.Responder", "--clients", "4"], "--clients",
     "Sender, Publisher, Receiver and Subscriber"),
    (["-m", "stomp.Sender", "--clients", "4"], "--clients", "a connection a thread"),
    (["-m", "loopback.Sender", "--clients", "2", "-nt", "4"], "--clients", "at least one"),
    (["-m", "loopback.Sender", "--connect-rate", "10"], "--connect-rate", "give --clients"),
    (["-m", "loopback.Sender", "--clients", "4", "-mg", "10"], "-mg", "not with --clients"),
    (["-m", "loopback.Sender", "--clients", "-3"], "--clients", ">= 0"),
    (["-m", "loopback.Sender", "--idle"], "--idle", "give --clients"),
    (["-m", "loopback.Sender", "--clients", "4", "--idle", "-rt", "1"], "--idle",
     "send nothing"),
    (["-m", "loopback.Sender", "--reconnect-every", "1"], "--reconnect-every",
     "give --clients"),
])
def test_clients_a_group_cannot_have_are_refused_in_one_line(harness, args, flag, says):
    result = harness("run", *args, "-d", "Q", "-rl", "1")
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and says in lines[0], result.stderr
    assert result.run_dir is None


def test_two_thousand_mqtt_clients_each_publish_and_nothing_is_lost(harness, brokers):
    """2,000 MQTT clients (QoS 1) on two threads, connected at 4,000 a second, each
    publishing once a second to one subscriber on Mosquitto: every client connected with
    an identity of its own (a shared client id would make Mosquitto drop the older
    connection: reconnects), every connection timed, every message delivered once."""
    d = unique("clients")
    mosquitto = " ".join(brokers["mosquitto"]["mqtt"])
    result = harness("run", "-m", "mqtt.Publisher", "-d", d, "--qos", "1", "--clients", "2000",
                     "-nt", "2", "--connect-rate", "4000", "--rate", "2000",
                     *brokers["mosquitto"]["mqtt"], "-g",
                     f"-m mqtt.Subscriber -d {d} --qos 1 {mosquitto}", "-rl", "6", "-sw", "2",
                     "-ss", "1", timeout=120)
    assert result.code == 0, result.stderr
    rows = counters(result, "publisher")
    assert all(r["clients"] == 2000 for r in rows)
    assert [r["clients_up"] for r in rows if r["phase"] == "measure"] == [2000] * 4
    assert sum(histogram_counts(result, "publisher.connect")) == 2000
    publisher = result.summary["groups"]["publisher"]
    subscriber = result.summary["groups"]["subscriber"]
    assert publisher["reconnects"] == publisher["errors"] == 0
    assert publisher["rate"] == pytest.approx(2000, rel=0.01)
    assert subscriber["lost"] == subscriber["duplicated"] == 0
    delivery = result.summary["delivery"][0]
    assert delivery["missing"] == delivery["duplicated"] == 0
    assert delivery["expected"] == delivery["received"] >= 4 * 2000


@pytest.fixture
def many_clients_mosquitto(brokers):
    """The broker script's Mosquitto for many clients (port 1886: no connection limit, the
    hard open-file limit), started as the script starts it; its pid."""
    state = Path(os.environ.get("HARNESS_BROKERS_STATE", "/var/tmp/harness-brokers"))
    with open(Path(os.environ.get("TMPDIR", "/tmp")) / "harness-brokers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["bash", str(ROOT / "contrib" / "brokers" / "brokers.sh"), "start",
                        "mosquitto-many"], check=True, timeout=300)
    pid = int((state / "mosquitto-many.pid").read_text())
    limits = Path(f"/proc/{pid}/limits").read_text()
    files = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    assert int(files.split()[3]) >= 10_000, files  # the soft limit raised to the hard one
    return pid


def test_idle_clients_are_held_and_their_memory_is_said(harness, many_clients_mosquitto):
    """3,000 clients that connect and only keep alive, against the many-clients Mosquitto
    given by its pid: every one connected and held to the end, nothing sent, and the memory
    each connection took in the client and in the broker in the summary, from the process
    and broker records' readings."""
    # A keep-alive of 30 s, as fleets of idle clients have: at the default 3 s, 3,000
    # clients send a thousand PINGREQs a second, which is not what this measures.
    result = harness("run", "-m", "mqtt.Publisher", "-d", unique("idle"), "--port", "1886",
                     "--clients", "3000", "-nt", "2", "--idle", "--connect-rate", "3000",
                     "--heartbeat", "30",
                     "--broker-pid", str(many_clients_mosquitto), "-rl", "4", "-sw", "0",
                     "-ss", "1", timeout=120)
    assert result.code == 0, result.stderr
    rows = counters(result, "publisher")
    assert [r["clients_up"] for r in rows][-2:] == [3000, 3000]
    assert sum(r["sent"] for r in rows) == 0
    assert sum(histogram_counts(result, "publisher.connect")) == 3000
    memory = result.summary["memory"]
    assert memory["connections"] == 3000
    process = [r for r in result.records("process")]
    broker = [r for r in result.records("broker")]
    start = process[0]["rss_start"]
    assert memory["client"]["start_bytes"] == start
    assert memory["client"]["end_bytes"] == process[-1]["rss"] > start
    assert memory["client"]["bytes_per_connection"] == \
        pytest.approx((process[-1]["rss"] - start) / 3000)
    # A client's connection (paho's client, its socket and buffers) costs kilobytes.
    assert 1_000 < memory["client"]["bytes_per_connection"] < 200_000
    # The broker's figure is its readings' (a long-lived broker may hold these connections
    # in memory an earlier run freed: its growth can be nothing).
    assert memory["broker"]["start_bytes"] == broker[0]["rss_start"] > 0
    # A broker serving other tests' clients too may free more than these take: its reading
    # at the end is said as it is, whichever way it went.
    assert memory["broker"]["end_bytes"] == broker[-1]["rss"] > 0
    assert memory["broker"]["bytes_per_connection"] == \
        pytest.approx((broker[-1]["rss"] - broker[0]["rss_start"]) / 3000)
    assert "memory with 3,000 connections held: client" in result.stdout


def test_churn_reconnects_every_client_and_loses_nothing_at_qos_1(harness, brokers):
    """100 MQTT clients with persistent sessions, each reconnecting every second while it
    publishes at QoS 1: every reconnection timed in the connect histogram, none counted as
    an outage (the harness closed them), nothing lost or duplicated."""
    d = unique("churn")
    mosquitto = " ".join(brokers["mosquitto"]["mqtt"])
    result = harness("run", "-m", "mqtt.Publisher", "-d", d, "--qos", "1", "--no-clean",
                     "--clients", "100", "--rate", "200", "--reconnect-every", "1",
                     *brokers["mosquitto"]["mqtt"], "-g",
                     f"-m mqtt.Subscriber -d {d} --qos 1 {mosquitto}", "-rl", "5", "-sw", "1",
                     "-ss", "1", timeout=120)
    assert result.code == 0, result.stderr
    connects = histogram_counts(result, "publisher.connect")
    # The first connections, then each client about once a second from its second second.
    assert 100 + 2 * 100 <= sum(connects) <= 100 + 5 * 100, connects
    publisher = result.summary["groups"]["publisher"]
    assert publisher["reconnects"] == publisher["outage_ms"] == publisher["errors"] == 0
    subscriber = result.summary["groups"]["subscriber"]
    assert subscriber["lost"] == subscriber["duplicated"] == 0
    delivery = result.summary["delivery"][0]
    assert delivery["missing"] == delivery["duplicated"] == 0


def test_reconnect_after_n_messages_reconnects_each_client_at_its_nth(harness):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "--clients", "10", "--rate",
                     "100", "--reconnect-after", "5", "-g", "-m loopback.Receiver -d Q",
                     "-rl", "3", "-sw", "0", "-ss", "1")
    assert result.code == 0, result.stderr
    sent = result.summary["groups"]["sender"]["sent"]
    connects = sum(histogram_counts(result, "sender.connect"))
    # Each client reconnects after its 5th, 10th ... message: sent // 5 in all, to within
    # the one client a message apart that ends a multiple of 5 short.
    assert 10 + (sent - 10 * 4) // 5 <= connects <= 10 + sent // 5, (sent, connects)
    assert result.summary["delivery"][0]["missing"] == 0


def test_clients_connect_from_the_source_addresses_in_turn(brokers, tmp_path):
    """30 MQTT clients over three loopback source addresses: the broker's side of every
    connection comes from them, ten from each."""
    topic = unique("sources")
    run = subprocess.Popen(
        harness_command("run", "-m", "mqtt.Publisher", "-d", topic, "--clients", "30",
                        "--rate", "30", "--source-addresses", "127.0.0.2-127.0.0.4",
                        *brokers["mosquitto"]["mqtt"], "-rl", "4", "-sw", "0", "-o",
                        str(tmp_path / "runs")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 30
        while run.poll() is None and time.monotonic() < deadline:
            listing = subprocess.run(["ss", "-Htn", "state", "established",
                                      "( dport = :1883 )"], capture_output=True, text=True,
                                     check=True).stdout
            seen |= {line.split()[-2] for line in listing.splitlines()
                     if line.split()[-2].startswith("127.0.0.") and
                     not line.split()[-2].startswith("127.0.0.1:")}
            time.sleep(0.2)
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0, stderr
    by_address = Counter(local.rpartition(":")[0] for local in seen)
    assert by_address == {"127.0.0.2": 10, "127.0.0.3": 10, "127.0.0.4": 10}


def test_loopback_consumer_clients_take_every_message(harness):
    """Loopback subscribers and receivers as clients: each waits on its inbox's eventfd with
    the thread's others, and every message reaches each subscriber once and the queue's
    receivers once between them."""
    result = harness("run", "-m", "loopback.Publisher", "-d", "T", "-rt", "200",
                     "-g", "-m loopback.Subscriber -d T --clients 50 -nt 2",
                     "-g", "-m loopback.Sender -d Q -rt 300",
                     "-g", "-m loopback.Receiver -d Q --clients 20",
                     "-rl", "3", "-sw", "1", "-ss", "1", timeout=60)
    assert result.code == 0, result.stderr
    assert sum(histogram_counts(result, "subscriber.subscribe")) == 50
    assert sum(histogram_counts(result, "receiver.subscribe")) == 20
    delivery = {d["destination"]: d for d in result.summary["delivery"]}
    assert delivery["loopback:topic:T"]["expected"] == \
        delivery["loopback:topic:T"]["received"] == 50 * 600
    assert delivery["loopback:queue:Q"]["expected"] == \
        delivery["loopback:queue:Q"]["received"] == 900
    for point in delivery.values():
        assert point["missing"] == point["duplicated"] == 0
    # Each message timed: the subscribers' latency histograms hold every one.
    assert sum(histogram_counts(result, "subscriber.latency")) == 50 * 600


@pytest.mark.parametrize(("args", "says"), [
    (["-m", "stomp.Sender", "--source-addresses", "127.0.0.2"], "connects from the address"),
    (["-m", "mqtt.Sender", "--source-addresses", "127.0.0.9-127.0.0.2"], "lower address"),
    (["-m", "mqtt.Sender", "--source-addresses", "127.0.0.x"], "127.0.0.x"),
])
def test_source_addresses_a_group_cannot_use_are_refused(harness, args, says):
    result = harness("run", *args, "-d", "Q", "-rl", "1")
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--source-addresses" in lines[0] and says in lines[0], \
        result.stderr


def test_clients_are_per_process_and_each_process_counts_its_own(harness):
    """--clients 5 in 2 processes: ten clients, five in each, each process's counters say
    its own, and the group's rate is split over all ten."""
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "--clients", "5",
                     "--processes", "2", "--rate", "100", "-g",
                     "-m loopback.Receiver -d Q --processes 2",
                     "-rl", "3", "-sw", "0", "-ss", "1")
    assert result.code == 0, result.stderr
    rows = counters(result, "sender")
    assert {r["process"] for r in rows} == {0, 1}
    assert {(r["clients"], r["clients_up"]) for r in rows} == {(5, 5)}
    assert result.summary["groups"]["sender"]["rate"] == pytest.approx(100, rel=0.02)
    assert sum(histogram_counts(result, "sender.connect")) == 10
    assert result.summary["memory"]["connections"] == 10
    assert result.summary["delivery"][0]["missing"] == 0


def test_mqtt_subscriber_clients_each_receive_every_message(harness, brokers):
    """50 subscribers on two threads, each a client of its own subscribed before the run
    (connect and subscribe timed apart): each sees every message, in order, once."""
    d = unique("subscribers")
    mosquitto = " ".join(brokers["mosquitto"]["mqtt"])
    result = harness("run", "-m", "mqtt.Publisher", "-d", d, "--qos", "1", "-rt", "20",
                     *brokers["mosquitto"]["mqtt"], "-g",
                     f"-m mqtt.Subscriber -d {d} --qos 1 --clients 50 -nt 2 --connect-rate "
                     f"500 {mosquitto}", "-rl", "4", "-sw", "1", "-ss", "1", timeout=120)
    assert result.code == 0, result.stderr
    assert sum(histogram_counts(result, "subscriber.connect")) == 50
    assert sum(histogram_counts(result, "subscriber.subscribe")) == 50
    assert {r["clients_up"] for r in counters(result, "subscriber")} == {50}
    publisher = result.summary["groups"]["publisher"]
    subscriber = result.summary["groups"]["subscriber"]
    # In the measured span, to within the last messages, received after its end.
    assert subscriber["received"] == pytest.approx(50 * publisher["sent"], rel=0.05)
    assert subscriber["lost"] == subscriber["duplicated"] == subscriber["reordered"] == 0
    delivery = result.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] == 50 * (20 * 4)
    assert delivery["missing"] == delivery["duplicated"] == 0


def test_clients_of_a_broker_slow_to_answer_connect_together_not_one_after_another(
        harness, brokers):
    """Each connection's CONNACK held 0.5 s (a proxy: a broker slow to answer, or far
    away): 40 publishers and 40 subscribers, each group on one thread, connect in about a
    second each, where one after another they would take 20 s each."""
    from tests.cutter import Cutter

    d = unique("slowconnect")
    port = int(brokers["mosquitto"]["mqtt"][1])
    slow = [Cutter(("127.0.0.1", port), delay=0.5) for _ in range(2)]
    try:
        began = time.monotonic()
        result = harness("run", "-m", "mqtt.Publisher", "-d", d, "--qos", "1", "--clients",
                         "40", "--rate", "40", "--port", str(slow[0].port), "-g",
                         f"-m mqtt.Subscriber -d {d} --qos 1 --clients 40 --port "
                         f"{slow[1].port}", "-rl", "4", "-sw", "0", "-ss", "1", timeout=120)
        took = time.monotonic() - began
    finally:
        for proxy in slow:
            proxy.close()
    assert result.code == 0, result.stderr
    for group in ("publisher", "subscriber"):
        connect = result.summary["groups"][group]["connect"]
        assert connect["p50"] >= 500_000, (group, connect)  # each was held
        assert sum(histogram_counts(result, f"{group}.connect")) == 40
    # The subscribers all subscribed before the run; the publishers were all up in its
    # second second.
    assert counters(result, "publisher")[1]["clients_up"] == 40
    assert took < 15, took
    delivery = result.summary["delivery"][0]
    assert delivery["missing"] == delivery["duplicated"] == 0


def test_mqtt_receiver_clients_share_a_queue_and_receive_each_message_once(harness, brokers):
    d = unique("receivers")
    mosquitto = " ".join(brokers["mosquitto"]["mqtt"])
    result = harness("run", "-m", "mqtt.Sender", "-d", d, "--qos", "1", "--rate", "300",
                     *brokers["mosquitto"]["mqtt"], "-g",
                     f"-m mqtt.Receiver -d {d} --qos 1 --clients 20 {mosquitto}", "-rl", "3",
                     "-sw", "0", "-ss", "1", timeout=120)
    assert result.code == 0, result.stderr
    receiver = result.summary["groups"]["receiver"]
    assert receiver["received"] == result.summary["groups"]["sender"]["sent"] == 900
    delivery = result.summary["delivery"][0]
    assert delivery["missing"] == delivery["duplicated"] == 0


def test_subscriber_churn_with_persistent_sessions_loses_nothing(harness, brokers):
    """20 subscriber clients with persistent sessions, each reconnecting twice a second
    while a publisher sends at QoS 1: what Mosquitto queued for a session while its client
    was away is delivered once when it is back, and the delivery check finds nothing missing
    and nothing twice."""
    d = unique("subchurn")
    mosquitto = " ".join(brokers["mosquitto"]["mqtt"])
    result = harness("run", "-m", "mqtt.Publisher", "-d", d, "--qos", "1", "-rt", "100",
                     *brokers["mosquitto"]["mqtt"], "-g",
                     f"-m mqtt.Subscriber -d {d} --qos 1 --no-clean --clients 20 "
                     f"--reconnect-every 0.5 {mosquitto}", "-rl", "4", "-sw", "1", "-ss", "1",
                     timeout=120)
    assert result.code == 0, result.stderr
    assert sum(histogram_counts(result, "subscriber.connect")) >= 20 + 20 * 4
    subscriber = result.summary["groups"]["subscriber"]
    assert subscriber["lost"] == subscriber["duplicated"] == subscriber["errors"] == 0
    delivery = result.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] == 20 * 100 * 4
    assert delivery["missing"] == delivery["duplicated"] == 0


def test_amqp_clients_send_compete_and_subscribe(harness, brokers):
    """AMQP 0-9-1 on RabbitMQ: 50 sender clients on a queue shared by 20 receiver clients,
    and 10 subscriber clients of a topic: every connection its own, every message
    delivered once to the queue and once to each subscriber."""
    queue, topic = unique("q.clients"), unique("t.clients")
    rabbit = " ".join(brokers["rabbitmq"]["amqp"])
    result = harness("run", "-m", "amqp.Sender", "-d", queue, "--clients", "50", "--rate",
                     "200", *brokers["rabbitmq"]["amqp"],
                     "-g", f"-m amqp.Receiver -d {queue} --clients 20 {rabbit}",
                     "-g", f"-m amqp.Publisher -d {topic} -rt 50 {rabbit}",
                     "-g", f"-m amqp.Subscriber -d {topic} --clients 10 {rabbit}",
                     "-rl", "3", "-sw", "1", "-ss", "1", timeout=120)
    assert result.code == 0, result.stderr
    assert sum(histogram_counts(result, "sender.connect")) == 50
    assert sum(histogram_counts(result, "receiver.subscribe")) == 20
    assert sum(histogram_counts(result, "subscriber.subscribe")) == 10
    delivery = {d["destination"]: d for d in result.summary["delivery"]}
    # Each sender client sends from when it connected (RabbitMQ takes milliseconds each).
    assert delivery[f"amqp:queue:{queue}"]["expected"] == \
        delivery[f"amqp:queue:{queue}"]["received"] >= 500
    assert delivery[f"amqp:topic:{topic}"]["expected"] == \
        delivery[f"amqp:topic:{topic}"]["received"] == 10 * 150
    for point in delivery.values():
        assert point["missing"] == point["duplicated"] == 0


def test_nats_clients_send_compete_and_subscribe(harness, brokers):
    """Core NATS: 100 publisher clients on a subject that 10 subscriber clients each take
    whole, and a queue group of 10 receiver clients: each client a connection (and an
    event loop) of its own, every message delivered once to each subscriber and once to the
    queue group."""
    topic, queue = unique("clients.t"), unique("clients.q")
    result = harness("run", "-m", "nats.Publisher", "-d", topic, "--clients", "100", "-nt",
                     "2", "--rate", "400",
                     "-g", f"-m nats.Subscriber -d {topic} --clients 10",
                     "-g", f"-m nats.Sender -d {queue} -rt 100",
                     "-g", f"-m nats.Receiver -d {queue} --clients 10",
                     "-rl", "3", "-sw", "1", "-ss", "1", timeout=120)
    assert result.code == 0, result.stderr
    assert sum(histogram_counts(result, "publisher.connect")) == 100
    assert sum(histogram_counts(result, "subscriber.subscribe")) == 10
    assert sum(histogram_counts(result, "receiver.subscribe")) == 10
    delivery = {d["destination"]: d for d in result.summary["delivery"]}
    # Publisher clients send from when each connected: most of the run's 1,200.
    assert delivery[f"nats:topic:{topic}"]["expected"] == \
        delivery[f"nats:topic:{topic}"]["received"] >= 10 * 1000
    assert delivery[f"nats:queue:{queue}"]["expected"] == \
        delivery[f"nats:queue:{queue}"]["received"] == 300
    for point in delivery.values():
        assert point["missing"] == point["duplicated"] == 0


def test_jetstream_publisher_clients_have_each_publish_acknowledged(harness, brokers):
    """JetStream: 50 publisher clients, each publish acknowledged by the server on its own
    client's connection and timed (confirm), consumed by a push subscriber client."""
    d = unique("clients.js")
    result = harness("run", "-m", "nats.Publisher", "-d", d, "--jetstream", "--storage",
                     "memory", "--clients", "50", "--rate", "200",
                     "-g", f"-m nats.Subscriber -d {d} --jetstream --storage memory "
                     f"--clients 5", "-rl", "3", "-sw", "1", "-ss", "1", timeout=120)
    assert result.code == 0, result.stderr
    publisher = result.summary["groups"]["publisher"]
    assert publisher["in_doubt"] == publisher["refused"] == publisher["errors"] == 0
    assert sum(histogram_counts(result, "publisher.confirm")) >= 500
    delivery = result.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] >= 5 * 500
    assert delivery["missing"] == delivery["duplicated"] == 0


class LimitedMosquitto(Mosquitto):
    extra = "max_connections 5"


def test_failed_connections_are_counted_and_tallied_by_reason(harness, brokers, tmp_path):
    """A Mosquitto of its own that holds about 5 connections: of 12 clients, those connect
    and send;
    each other client's attempts (one a second) fail, each counted once as a failed
    connection (and an error), the interval's tallied by reason in the log."""
    server = LimitedMosquitto(tmp_path / "mosquitto")
    server.start()
    try:
        result = harness("run", "-m", "mqtt.Publisher", "-d", unique("limit"), "--port",
                         str(server.ports["mqtt"]), "--clients", "12", "--rate", "12", "-rl",
                         "3", "-sw", "0", "-ss", "1", timeout=60)
    finally:
        server.stop()
    assert result.code == 0, result.stderr
    rows = counters(result, "publisher")
    # How many the broker takes is its own count (Mosquitto has let one more in): some, and
    # not all.
    up = rows[0]["clients_up"]
    assert 0 < up < 12 and [r["clients_up"] for r in rows] == [up] * 3
    # Those left out try once in each second of the run.
    assert [r["connect_failed"] for r in rows] == [12 - up] * 3
    assert [r["errors"] for r in rows] == [12 - up] * 3
    publisher = result.summary["groups"]["publisher"]
    assert publisher["connect_failed"] == 3 * (12 - up) and publisher["sent"] == 3 * up
    # Each interval's failures tallied by reason in its line, the last interval's (handed
    # off as the thread ends, not at a boundary) as every other's.
    assert result.stderr.count(f"{12 - up} connections failed: {12 - up} × the server closed "
                               "the connection before a CONNACK (a broker at its connection "
                               "limit") == 3
    assert f"{3 * (12 - up)} connection attempts failed" in result.stdout
