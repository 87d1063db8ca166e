"""OAuth 2 access tokens on RabbitMQ: a node of the test's own with its
rabbitmq_auth_backend_oauth2 plugin takes a JWT it can verify as the password of an AMQP
0-9-1, STOMP or MQTT login (not AMQP 1.0: see PAIRS). The harness passes the token as it
passes any password, from the environment or a file (never a flag here: the token is a
secret), and prints it nowhere; a token signed by another key, or expired, is refused at the
start in one line."""

from __future__ import annotations

import os

import pytest

from tests.conftest import login_runs, unique

# Every resource of every vhost, and (vhost/exchange/routing key) every topic: what an MQTT
# publish and subscription are authorized against.
ALL = ["rabbitmq.read:*/*", "rabbitmq.write:*/*", "rabbitmq.configure:*/*",
       "rabbitmq.read:*/*/*", "rabbitmq.write:*/*/*"]


@pytest.fixture(scope="module")
def node(tmp_path_factory, brokers):
    from tests.servers import OAuthRabbitMQ

    server = OAuthRabbitMQ(tmp_path_factory.mktemp("oauth2"))
    server.start()
    yield server
    server.stop()


# Each transport's pair, its port by the node's name for it, and flags for RabbitMQ. (Not
# AMQP 1.0: RabbitMQ 3.10's AMQP 1.0 plugin crashes the session of a user a token logged in,
# in the broker, whatever the client: rabbit_amqp1_0_session_process fails to start.)
PAIRS = {
    "amqp": ("amqp", "-m amqp.Sender", "-m amqp.Receiver", "{d}", []),
    "stomp": ("stomp", "-m stomp.Sender", "-m stomp.Receiver", "/queue/{d}",
              ["--flavour", "rabbitmq", "--vhost", "/"]),
    "mqtt": ("mqtt", "-m mqtt.Publisher", "-m mqtt.Subscriber", "oauth/{d}",
             ["--flavour", "rabbitmq", "--qos", "1"]),
}


@pytest.mark.parametrize("transport", sorted(PAIRS))
def test_an_access_token_logs_in_as_a_password_and_is_printed_nowhere(harness, tmp_path, node,
                                                                       transport):
    protocol, producer, consumer, destination, flags = PAIRS[transport]
    token = node.token(ALL)
    os.environ["HARNESS_TEST_TOKEN"] = token
    try:
        login = ["--user", "harness-test", "--password-env", "HARNESS_TEST_TOKEN"]
        runs = login_runs(harness, tmp_path, login, token)
        d = destination.format(d=unique("oauth"))
        port = str(node.ports[protocol])
        done, summary = runs(*producer.split(), "-d", d, "--port", port, *flags, "-rt", "100",
                             "-g", " ".join([*consumer.split(), "-d", d, "--port", port, *flags,
                                             *login]))
        assert done.code == 0, done.stderr[-2000:]
        assert summary is not None
        [check] = summary["delivery"]
        assert check["expected"] == check["received"] >= 150 and check["missing"] == 0, check
        # Refused: signed by another key (this one's own, but altered), and expired.
        for bad, why in ((token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"),
                          "bad signature"), (node.token(ALL, lifetime=-120), "expired")):
            os.environ["HARNESS_TEST_TOKEN"] = bad
            refused, _ = runs(*producer.split(), "-d", d, "--port", port, *flags, "-rt", "10")
            assert refused.code == 1, (why, refused.stderr[-1500:])
            lines = [x for x in refused.stderr.splitlines() if x.startswith("harness: error")]
            assert len(lines) == 1 and "Traceback" not in refused.stderr, (why, refused.stderr)
    finally:
        os.environ.pop("HARNESS_TEST_TOKEN", None)
