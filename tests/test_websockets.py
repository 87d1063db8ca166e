"""STOMP and MQTT over WebSockets, every role, against RabbitMQ's web_stomp and web_mqtt
plugins (the shared node's ws listeners on 15674 and 15675, which speak nothing but
WebSockets), and over TLS (wss) against a node of the test's own; the fault matrix runs both
through a crash, a cut and a partition (tests/test_fault_matrix.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_certificates, unique

WEB_STOMP, WEB_MQTT = 15674, 15675
WS = ["--websocket", "/ws"]
STOMP = ["--flavour", "rabbitmq", "--vhost", "/"]
MQTT = ["--flavour", "rabbitmq", "--qos", "1"]


def pair(harness, producer: str, consumer: str, destination: str, port: int, flags: list[str],
         *extra: str):  # type: ignore[no-untyped-def]
    over = " ".join([*flags, *WS, "--port", str(port)])
    done = harness("run", "-m", producer, "-d", destination, *flags, *WS, "--port", str(port),
                   "-rt", "100", "-rl", "3", "-ss", "1", *extra,
                   "-g", f"-m {consumer} -d {destination} {over}")
    assert done.code == 0, done.stderr[-2000:]
    return done.summary


@pytest.mark.parametrize(("producer", "consumer", "destination"), [
    ("stomp.Sender", "stomp.Receiver", "/queue/ws.{}"),
    ("stomp.Publisher", "stomp.Subscriber", "/topic/ws.{}"),
    ("mqtt.Publisher", "mqtt.Subscriber", "ws/{}"),
])
def test_every_message_crosses_websockets(harness, brokers, producer, consumer, destination):
    stomp = producer.startswith("stomp")
    summary = pair(harness, producer, consumer, destination.format(unique("ws")),
                   WEB_STOMP if stomp else WEB_MQTT, STOMP if stomp else MQTT,
                   *(["-pp"] if producer == "stomp.Sender" else []))
    [check] = summary["delivery"]
    assert check["expected"] == check["received"] >= 290 and check["missing"] == 0, check
    groups = summary["groups"]
    assert all(g["errors"] == 0 for g in groups.values()), groups


@pytest.mark.parametrize("transport", ["stomp", "mqtt"])
def test_request_reply_over_websockets(harness, brokers, transport):
    stomp = transport == "stomp"
    destination = f"/queue/ws.req.{unique('r')}" if stomp else f"ws/req/{unique('r')}"
    summary = pair(harness, f"{transport}.Requestor", f"{transport}.Responder", destination,
                   WEB_STOMP if stomp else WEB_MQTT, STOMP if stomp else MQTT)
    requestor = summary["groups"]["requestor"]
    assert requestor["received"] >= 290 and requestor["errors"] == 0, requestor


def test_many_mqtt_clients_of_one_thread_over_websockets(harness, brokers):
    """Twenty clients on one thread, each its own WebSocket, driven by the thread's loop."""
    topic = f"ws/many/{unique('c')}"
    done = harness("run", "-m", "mqtt.Publisher", "-d", topic, *MQTT, *WS, "--port",
                   str(WEB_MQTT), "--clients", "20", "--rate", "200", "-rl", "3", "-ss", "1",
                   "-g", f"-m mqtt.Subscriber -d {topic} {' '.join([*MQTT, *WS])} --port "
                   f"{WEB_MQTT}")
    assert done.code == 0, done.stderr[-2000:]
    publisher = done.summary["groups"]["publisher"]
    assert publisher["sent"] >= 550 and publisher["errors"] == 0, publisher
    [check] = done.summary["delivery"]
    assert check["missing"] == 0 and check["received"] == check["expected"], check


def test_tcp_on_a_websocket_port_fails_in_one_line(harness, brokers):
    """What proves the runs above went over WebSockets: the same flags without --websocket
    get no MQTT answer from 15675."""
    done = harness("run", "-m", "mqtt.Publisher", "-d", "ws/tcp", *MQTT, "--port",
                   str(WEB_MQTT), "-rl", "1", "--heartbeat", "1")
    assert done.code == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cannot connect to 127.0.0.1:15675" in done.stderr


@pytest.fixture(scope="module")
def wss_rabbitmq(tmp_path_factory, brokers):
    from tests.servers import WebTlsRabbitMQ

    certificates = tmp_path_factory.mktemp("wss")
    make_certificates(certificates)
    node = WebTlsRabbitMQ(certificates / "node", certificates)
    node.start()
    yield node, certificates / "ca.pem"
    node.stop()


@pytest.mark.parametrize("transport", ["stomp", "mqtt"])
def test_wss_verifies_the_broker_with_the_ca_given(harness, wss_rabbitmq, transport, tmp_path):
    node, ca = wss_rabbitmq
    stomp = transport == "stomp"
    port = node.ports["wss_stomp" if stomp else "wss_mqtt"]
    flags = [*(STOMP if stomp else MQTT), "--tls", "--ca", str(ca)]
    destination = f"/queue/wss.{unique('q')}" if stomp else f"wss/{unique('t')}"
    producer, consumer = ("stomp.Sender", "stomp.Receiver") if stomp else \
        ("mqtt.Publisher", "mqtt.Subscriber")
    summary = pair(harness, producer, consumer, destination, port, flags)
    [check] = summary["delivery"]
    assert check["expected"] == check["received"] >= 290, check
    # Without the CA the broker's certificate cannot be verified: one line, at once.
    refused = harness("run", "-m", producer, "-d", destination, *(STOMP if stomp else MQTT),
                      "--tls", *WS, "--port", str(port), "-rl", "1", "-o",
                      str(tmp_path / "refused"), output=False)
    assert refused.code == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "certificate verify failed" in refused.stderr, refused.stderr


def test_the_endpoint_says_websockets(tmp_path: Path):
    from harness.modules import transport_class

    from tests.conftest import settings_for

    settings = settings_for("mqtt.Publisher", destination="t", websocket="/ws", port=15675)
    assert transport_class("mqtt").endpoint(settings).endswith("@127.0.0.1:15675 ws:/ws")
