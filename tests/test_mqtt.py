"""The MQTT transport against real Mosquitto, ActiveMQ and RabbitMQ brokers."""

import shlex
import subprocess
import time

import pytest
from harness.modules.interface.base import connect
from harness.modules.interface.message import Destination, Message
from harness.modules.mqtt import MqttTransport

from tests.conftest import (
    env,
    free_port,
    login_runs,
    make_certificates,
    settings_for,
    unique,
    wait_for_port,
)
from tests.servers import SecuredMosquitto


def flags(brokers, broker):
    return brokers[broker]["mqtt"]


def group(brokers, broker, text):
    return text + " " + shlex.join(flags(brokers, broker))


@pytest.mark.parametrize("protocol", ["3.1.1", "5"])
@pytest.mark.parametrize("qos", ["0", "1", "2"])
def test_mosquitto_publish_subscribe_each_qos(harness, brokers, protocol, qos):
    d = unique("pubsub")
    common = f"--qos {qos} --protocol {protocol} --user harness --password-env MQTT_SECRET"
    result = harness("run", "-m", "mqtt.Publisher", "-d", d, "-rt", "1000", "-mg", "1000",
                     *shlex.split(common), *flags(brokers, "mosquitto"), "-ss", "1",
                     "-g", group(brokers, "mosquitto", f"-m mqtt.Subscriber -d {d} -nt 2 "
                                                       f"--crc 1 {common}"))
    assert result.code == 0, result.stderr
    subscriber = result.summary["groups"]["subscriber"]
    assert subscriber["received"] == 2000
    assert subscriber["lost"] == subscriber["duplicated"] == subscriber["corrupt"] == 0


def test_mosquitto_queues_are_shared_subscriptions(harness, brokers):
    d = unique("queue")
    result = harness("run", "-m", "mqtt.Sender", "-d", d, "-rt", "1000", "-mg", "600",
                     "--qos", "1", *flags(brokers, "mosquitto"), "-ss", "1",
                     "-g", group(brokers, "mosquitto", f"-m mqtt.Receiver -d {d} -nt 3 --qos 1"))
    assert result.code == 0, result.stderr
    # Competing consumers: each message once, to one of the three.
    assert result.summary["groups"]["receiver"]["received"] == 600
    assert result.summary["delivery"][0]["missing"] == 0


@pytest.mark.parametrize(("broker", "protocol", "responders"),
                         [("mosquitto", "5", 2), ("mosquitto", "3.1.1", 2),
                          ("activemq", "3.1.1", 1), ("rabbitmq", "3.1.1", 1)])
def test_request_reply(harness, brokers, broker, protocol, responders):
    d = unique("rr")
    result = harness("run", "-m", "mqtt.Requestor", "-d", d, "-nt", "2", "-mg", "100",
                     "--qos", "1", "--protocol", protocol, *flags(brokers, broker), "-ss", "1",
                     "-g", group(brokers, broker, f"-m mqtt.Responder -d {d} --qos 1 "
                                                  f"-nt {responders} --protocol {protocol}"))
    assert result.code == 0, result.stderr
    requestor = result.summary["groups"]["requestor"]
    assert requestor["received"] == 200 and requestor["timeouts"] == 0


@pytest.mark.parametrize(("broker", "qos"), [("activemq", "1"), ("activemq", "2"),
                                             ("rabbitmq", "1")])
def test_other_brokers_deliver_without_loss_at_qos_1_and_2(harness, brokers, broker, qos):
    d = unique("t")
    result = harness("run", "-m", "mqtt.Publisher", "-d", d, "-rt", "500", "-mg", "500",
                     "--qos", qos, *flags(brokers, broker), "-ss", "1",
                     "-g", group(brokers, broker, f"-m mqtt.Subscriber -d {d} --qos {qos}"))
    assert result.code == 0, result.stderr
    subscriber = result.summary["groups"]["subscriber"]
    assert subscriber["received"] == 500 and subscriber["lost"] == 0


def test_mosquitto_drops_qos0_for_a_slow_subscriber_and_the_harness_reports_it(harness,
                                                                                brokers):
    d = unique("lossy")
    result = harness("run", "-m", "mqtt.Publisher", "-d", d, "--processes", "2", "-rl", "3",
                     *flags(brokers, "mosquitto"), "-ss", "1",
                     "-g", group(brokers, "mosquitto", f"-m mqtt.Subscriber -d {d}"))
    assert result.code == 0, result.stderr
    sent = result.summary["groups"]["publisher"]["sent"]
    subscriber = result.summary["groups"]["subscriber"]
    assert subscriber["lost"] > 0, "Mosquitto dropped nothing: the subscriber was not slow"
    assert subscriber["lost"] == sent - subscriber["received"]
    (delivery,) = result.summary["delivery"]
    assert delivery["missing"] == subscriber["lost"]
    # Drops show where they were seen: in interval lines (gaps) or, when Mosquitto dropped the
    # stream's tail, only in the delivery check the summary prints.
    assert f"missing {delivery['missing']}" in result.stdout


def test_messages_from_other_clients_are_counted_as_foreign_never_timed(harness, brokers,
                                                                        tmp_path):
    topic = unique("foreign")
    # Published once the run has closed its first interval (subscribed by then): a fixed
    # delay lost the race with a slow start on a busy machine.
    feeder = subprocess.Popen(["bash", "-c", "for _ in $(seq 600); do grep -qs counters "
                               "runs/*/intervals.jsonl && break; sleep 0.05; done; "
                               f"mosquitto_pub -p 1883 -t {topic} -m hello --repeat 50"],
                              cwd=tmp_path)
    result = harness("run", "-m", "mqtt.Subscriber", "-d", topic, "-rl", "4", "-ss", "1",
                     *flags(brokers, "mosquitto"))
    feeder.wait(timeout=10)
    assert result.code == 0, result.stderr
    subscriber = result.summary["groups"]["subscriber"]
    assert subscriber["received"] == subscriber["foreign"] == 50
    assert subscriber["duplicated"] == 0 and subscriber["latency"]["max"] is None
    assert "foreign=" in result.stdout


def test_persistent_session_keeps_qos1_messages_while_offline(brokers):
    topic = Destination("topic", unique("session"))
    settings = settings_for("mqtt.Subscriber", port=1883, flavour="mosquitto", protocol="5",
                            qos=1, clean=False, session_expiry=300,
                            client_id=unique("client"))
    subscriber = MqttTransport(settings)
    connect(subscriber)
    subscriber.subscribe(topic)
    subscriber.close()
    publisher = MqttTransport(settings_for("mqtt.Publisher", port=1883, qos=1))
    connect(publisher)
    for seq in range(5):
        publisher.send(topic, Message(b"x", "p", seq, 0, 0))
    time.sleep(0.5)
    publisher.close()
    subscriber = MqttTransport(settings)
    connect(subscriber)  # the session is found again: no new SUBSCRIBE needed
    try:
        seqs = []
        while (m := subscriber.receive(2.0)) is not None:
            seqs.append(m.seq)
        assert seqs == [0, 1, 2, 3, 4]
    finally:
        subscriber.close()


# -- TLS, against a Mosquitto of the test's own with a certificate the test makes

@pytest.fixture
def tls_mosquitto(tmp_path):
    make_certificates(tmp_path)
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"user root\nlistener {port} 127.0.0.1\nallow_anonymous true\n"
                    f"cafile {tmp_path / 'ca.pem'}\ncertfile {tmp_path / 'server.pem'}\n"
                    f"keyfile {tmp_path / 'server.key'}\npersistence false\n")
    proc = subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for_port(port)
    yield port, tmp_path / "ca.pem"
    proc.terminate()
    proc.wait(10)


def test_tls_to_mosquitto_with_a_self_signed_certificate(harness, brokers, tls_mosquitto):
    port, ca = tls_mosquitto
    tls = f"--port {port} --tls --ca {ca}"
    result = harness("run", "-m", "mqtt.Publisher", "-d", "secure", "-mg", "200",
                     "-rt", "500", *shlex.split(tls), "-ss", "1",
                     "-g", f"-m mqtt.Subscriber -d secure {tls}")
    assert result.code == 0, result.stderr
    assert result.summary["groups"]["subscriber"]["received"] == 200


def test_tls_refuses_a_broker_it_cannot_verify(harness, brokers, tls_mosquitto):
    port, _ = tls_mosquitto
    result = harness("run", "-m", "mqtt.Publisher", "-d", "secure", "-mg", "1",
                     "--port", str(port), "--tls")
    assert result.code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect" in lines[0] and "CERTIFICATE" in \
        lines[0].upper(), result.stderr


@pytest.mark.parametrize("qos", ["1", "2"])
def test_a_producer_driving_pahos_loop_itself_loses_nothing_at_qos_1_and_2(harness, brokers,
                                                                          qos):
    """Senders and Publishers drive paho's network loop from their own thread: what they
    queue goes out in batches, acknowledgements are read between them, and none is lost."""
    d = unique("driven")
    result = harness("run", "-m", "mqtt.Publisher", "-d", d, "-rt", "3000", "-mg", "6000",
                     "--qos", qos, "--inflight", "10", *flags(brokers, "mosquitto"), "-ss", "1",
                     "-g", group(brokers, "mosquitto", f"-m mqtt.Subscriber -d {d} --qos {qos}"))
    assert result.code == 0, result.stderr
    publisher, subscriber = (result.summary["groups"][g] for g in ("publisher", "subscriber"))
    assert publisher["sent"] == 6000 and publisher["errors"] == 0
    assert subscriber["received"] == 6000
    assert subscriber["lost"] == subscriber["duplicated"] == 0


def test_a_mosquitto_with_passwords_and_an_acl_admits_refuses_and_drops_as_it_says(
        harness, brokers, tmp_path):
    """A Mosquitto of its own with a password file and an ACL: the user's password from the
    environment gets in; a wrong one is turned away at the start in one line; a QoS 1
    publish where the ACL denies writing is refused message by message on MQTT 5 and, on
    MQTT 3.1.1, which has no way to say so, acknowledged and dropped: the delivery check
    then counts every one missing, so that no figure calls them delivered."""
    secret = env()["MQTT_SECRET"]
    server = SecuredMosquitto(tmp_path / "mosquitto", {"bench": secret},
                              "user bench\ntopic readwrite bench/#\ntopic read ro/#\n")
    server.start()
    port = str(server.ports["mqtt"])
    login = ["--port", port, "--user", "bench", "--password-env", "MQTT_SECRET"]

    logged_in = login_runs(harness, tmp_path, login, secret, timeout=60)

    def run(*args: str) -> tuple[object, dict]:
        done, summary = logged_in(*args, "-rt", "50", "--qos", "1")
        assert done.code == 0 and summary is not None, done.stderr
        return done, summary

    try:
        _, allowed = run("-m", "mqtt.Publisher", "-d", "bench/t", "--protocol", "5",
                         "--processes", "2", "-g",
                         f"-m mqtt.Subscriber -d bench/t --protocol 5 {' '.join(login)}")
        denied, refusals = run("-m", "mqtt.Publisher", "-d", "ro/t", "--protocol", "5")
        _, dropped = run("-m", "mqtt.Publisher", "-d", "ro/t", "-g",
                         f"-m mqtt.Subscriber -d ro/t {' '.join(login)}")
        wrong = harness("run", "-m", "mqtt.Publisher", "-d", "bench/t", "--port", port,
                        "--user", "bench", "--password", "wrong", "-rl", "1", "-o",
                        str(tmp_path / "wrong"), timeout=60, output=False)
    finally:
        server.stop()
    delivered = allowed["delivery"][0]
    assert delivered["expected"] == delivered["received"] >= 100
    refused = refusals["groups"]["publisher"]
    assert refused["sent"] + refused["unsent"] >= 100  # due: sent, or late at the stop
    assert refused["refused"] == refused["sent"] > 0
    assert "the broker refused it: Not authorized" in denied.stderr
    sent, check = dropped["groups"]["publisher"], dropped["delivery"][0]
    assert sent["sent"] + sent["unsent"] >= 100 and sent["refused"] == sent["errors"] == 0
    assert check["received"] == 0 and check["missing"] == check["expected"] == sent["sent"]
    assert wrong.code == 1 and wrong.stderr.strip().endswith("Not authorized")
    assert "Traceback" not in wrong.stderr
