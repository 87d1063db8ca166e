"""Many clients on one worker thread (--clients): each client its own connection, producer
stream and schedule; connections timed and paced."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conftest import only_run_dir, unique


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
        assert subscriber["received"] == publisher["sent"] == 600, how
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
    (["-m", "loopback.Receiver", "--clients", "4"], "--clients", "Sender and Publisher"),
    (["-m", "stomp.Sender", "--clients", "4"], "--clients", "a connection a thread"),
    (["-m", "loopback.Sender", "--clients", "2", "-nt", "4"], "--clients", "at least one"),
    (["-m", "loopback.Sender", "--connect-rate", "10"], "--connect-rate", "give --clients"),
    (["-m", "loopback.Sender", "--clients", "4", "-mg", "10"], "-mg", "not with --clients"),
    (["-m", "loopback.Sender", "--clients", "-3"], "--clients", ">= 0"),
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
