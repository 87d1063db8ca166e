"""The STOMP transport against real ActiveMQ and RabbitMQ brokers."""

import shlex
import threading
import time

import pytest
from harness.modules.interface.base import connect
from harness.modules.interface.message import Destination, Message
from harness.modules.stomp import StompTransport

from tests.conftest import (
    env,
    login_runs,
    redelivered_beside_a_killed_receiver,
    settings_for,
    unique,
)
from tests.servers import SecuredActiveMQ

STOMP_BROKERS = ["activemq", "rabbitmq"]


def flags(brokers, broker):
    return brokers[broker]["stomp"]


def group(brokers, broker, text):
    return text + " " + shlex.join(flags(brokers, broker))


def transport(brokers, broker, **extra):
    args = flags(brokers, broker)
    settings = settings_for("stomp.Subscriber", port=int(args[1]), flavour=args[3],
                            vhost="/" if broker == "rabbitmq" else None, **extra)
    t = StompTransport(settings)
    connect(t)
    return t


def message(seq, persistent=False):
    return Message(b"payload", "tester", seq, 0, 0, persistent=persistent)


def drain(t, wait=1.0):
    seqs = []
    while (m := t.receive(wait)) is not None:
        seqs.append(m.seq)
        t.ack(m)
        wait = 0.3
    return seqs


def test_numbered_destinations_and_text_bodies(harness, brokers):
    d = unique("numbered")
    amq = flags(brokers, "activemq")
    result = harness(
        "run", "-m", "stomp.Sender", "-d", f"{d}.", "-dx", "3", "-nt", "3", "-mg", "200",
        "-rt", "400", "--type", "text", "-ms", "2k", "-ss", "1", *amq,
        "-g", group(brokers, "activemq", f"-m stomp.Receiver -gn all -d {d}. -dx 3 -nt 3 "
                                         "--crc 1"),
        "-g", group(brokers, "activemq", f"-m stomp.Receiver -gn two -d {d}.2 -mg 200"))
    assert result.code == 0, result.stderr
    groups = result.summary["groups"]
    assert groups["sender"]["sent"] == 600
    # Thread n sends to <d>.<n>; the queues are shared between the two receiving groups.
    assert groups["all"]["received"] + groups["two"]["received"] == 600
    assert groups["two"]["received"] <= 200 and groups["all"]["received"] >= 400
    assert groups["all"]["corrupt"] == 0  # text frames carry the bodies intact


@pytest.mark.parametrize("broker", STOMP_BROKERS)
@pytest.mark.parametrize(("producer", "consumer"), [("Sender", "Receiver"),
                                                    ("Publisher", "Subscriber")])
def test_one_way_roles_deliver_every_message(harness, brokers, broker, producer, consumer):
    d = unique("one-way")
    result = harness("run", "-m", f"stomp.{producer}", "-d", d, "-rt", "500", "-mg", "500",
                     "-nt", "2", "-ss", "1", *flags(brokers, broker), "-g",
                     group(brokers, broker, f"-m stomp.{consumer} -d {d} -nt 2 --crc 1"))
    assert result.code == 0, result.stderr
    groups = result.summary["groups"]
    copies = 2 if consumer == "Subscriber" else 1
    assert groups[producer.lower()]["sent"] == 1000
    assert groups[consumer.lower()]["received"] == 1000 * copies
    assert groups[consumer.lower()]["corrupt"] == 0
    (delivery,) = result.summary["delivery"]
    assert delivery["missing"] == 0 and delivery["duplicated"] == 0
    if consumer == "Subscriber":
        assert groups["subscriber"]["lost"] == groups["subscriber"]["reordered"] == 0


@pytest.mark.parametrize("broker", STOMP_BROKERS)
@pytest.mark.parametrize("reply", ["temporary", "fixed"])
def test_request_reply_round_trips(harness, brokers, broker, reply):
    d = unique("requests")
    extra = ["--reply-queue", unique("replies")] if reply == "fixed" else []
    result = harness("run", "-m", "stomp.Requestor", "-d", d, "-nt", "3", "-mg", "100",
                     "-ss", "1", *flags(brokers, broker), *extra, "-g",
                     group(brokers, broker, f"-m stomp.Responder -d {d} -nt 2"))
    assert result.code == 0, result.stderr
    requestor = result.summary["groups"]["requestor"]
    assert requestor["sent"] == requestor["received"] == 300
    assert requestor["timeouts"] == 0
    assert requestor["latency"]["p50"] > 0
    assert result.summary["groups"]["responder"]["sent"] == 300


@pytest.mark.parametrize("broker", STOMP_BROKERS)
def test_stomp_1_1_with_heart_beats(harness, brokers, broker):
    d = unique("v11")
    v11 = "--protocol 1.1 --heartbeat 0.5"
    result = harness("run", "-m", "stomp.Sender", "-d", d, "-rt", "200", "-rl", "3", "-ss", "1",
                     *shlex.split(v11), *flags(brokers, broker), "-g",
                     group(brokers, broker, f"-m stomp.Receiver -d {d} --ack client {v11}"))
    assert result.code == 0, result.stderr
    assert result.summary["groups"]["receiver"]["received"] == 600
    assert result.summary["groups"]["receiver"]["errors"] == 0


@pytest.mark.parametrize("broker", STOMP_BROKERS)
def test_persistent_transacted_client_acknowledged_run(harness, brokers, broker):
    d = unique("persistent")
    result = harness("run", "-m", "stomp.Sender", "-d", d, "-pp", "-tx", "-cc", "10",
                     "-mg", "200", "-ss", "1", *flags(brokers, broker), "-g",
                     group(brokers, broker,
                           f"-m stomp.Receiver -d {d} --ack client-individual --prefetch 10"))
    assert result.code == 0, result.stderr
    assert result.summary["groups"]["sender"]["commits"] == 20
    receiver = result.summary["groups"]["receiver"]
    assert receiver["received"] == 200 and receiver["lost"] == 0


def test_a_port_that_speaks_another_protocol_is_named_as_such(harness, brokers):
    """RabbitMQ's AMQP port takes the TCP connection, answers STOMP's CONNECT with AMQP's
    own header and closes: not a refused connection, a port of another protocol."""
    result = harness("run", "-m", "stomp.Sender", "-d", "Q", "-rt", "100", "-rl", "3",
                     "--port", "5672")
    assert result.code == 1
    assert "cannot connect to 127.0.0.1:5672: the server took the connection and closed it " \
           "without answering CONNECT (is this a STOMP port?)" in result.stderr
    assert "refused" not in result.stderr


def test_selectors_deliver_only_matching_messages(harness, brokers):
    d = unique("filtered")
    amq = flags(brokers, "activemq")
    result = harness(
        "run", "-m", "stomp.Sender", "-gn", "eu", "-d", d, "--property", "region=eu",
        "--property", "weight=5", "-mg", "300", "-ss", "1", *amq,
        "-g", group(brokers, "activemq", f"-m stomp.Sender -gn us -d {d} --property region=us "
                                         "--property weight=50 -mg 200"),
        "-g", group(brokers, "activemq", f"-m stomp.Receiver -gn geteu -d {d} "
                                         "--selector \"region = 'eu'\""),
        "-g", group(brokers, "activemq", f"-m stomp.Receiver -gn heavy -d {d} "
                                         "--selector 'weight > 10'"))
    assert result.code == 0, result.stderr
    groups = result.summary["groups"]
    assert groups["geteu"]["received"] == 300
    assert groups["heavy"]["received"] == 200  # numeric comparison of a header
    # A sequence check per producer still holds for each selector's consumer.
    assert groups["geteu"]["lost"] == groups["heavy"]["lost"] == 0
    # The destination's delivery check cannot balance what each selector should get, and
    # says so rather than vanishing.
    assert result.summary["delivery"] == []
    (unchecked,) = result.summary["unchecked"]
    assert unchecked["destination"] == f"stomp:queue:{d}"
    assert f"delivery stomp:queue:{d}: no check: its consumers select with --selector" in \
        result.stdout


@pytest.mark.parametrize("broker", STOMP_BROKERS)
def test_nothing_is_visible_before_commit_and_abort_discards(brokers, broker):
    q = Destination("queue", unique("tx"))
    receiver = transport(brokers, broker)
    receiver.subscribe(q)
    sender = transport(brokers, broker)
    try:
        sender.begin()
        sender.send(q, message(1))
        sender.send(q, message(2))
        assert receiver.receive(0.5) is None
        sender.commit()
        assert drain(receiver) == [1, 2]
        sender.begin()
        sender.send(q, message(3))
        sender.abort()
        assert receiver.receive(0.5) is None
    finally:
        sender.close()
        receiver.close()


@pytest.mark.parametrize("broker", STOMP_BROKERS)
def test_durable_subscription_receives_what_was_published_while_offline(brokers, broker):
    topic = Destination("topic", unique("durable"))
    name = unique("sub")
    settings = {"client_id": f"{name}-client", "durable_name": name}
    subscriber = transport(brokers, broker, **settings)
    subscriber.subscribe(topic)
    subscriber.close()
    publisher = transport(brokers, broker)
    for seq in range(5):
        publisher.send(topic, message(seq, persistent=True))
    publisher.close()
    subscriber = transport(brokers, broker, **settings)
    try:
        subscriber.subscribe(topic)
        assert drain(subscriber, wait=3.0) == [0, 1, 2, 3, 4]
    finally:
        subscriber.close()


@pytest.mark.parametrize("broker", STOMP_BROKERS)
def test_what_a_dead_receiver_held_is_redelivered_and_counted(tmp_path, brokers, broker):
    # The broker marks what the frozen receiver held unacknowledged `redelivered: true`.
    redelivered_beside_a_killed_receiver(
        tmp_path, "stomp", unique("stomp.dead"),
        ["--ack", "client-individual", "--prefetch", "200", *flags(brokers, broker)],
        [*flags(brokers, broker), "-rt", "1000"])


def test_a_broker_that_is_down_is_one_line_and_exit_1(harness):
    started = time.monotonic()
    result = harness("run", "-m", "stomp.Sender", "-d", "Q", "--port", "1", "-rl", "1",
                     "--connect-retry", "2")
    assert result.code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to 127.0.0.1:1" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    # Two retries with back-off (0.5 s, then 1 s) happened before giving up.
    assert time.monotonic() - started >= 1.5


def test_wrong_credentials_are_reported(harness, brokers):
    result = harness("run", "-m", "stomp.Sender", "-d", "Q", *flags(brokers, "rabbitmq"),
                     "--user", "nobody", "--password", "wrong", "-rl", "1")
    assert result.code == 1
    assert "cannot connect" in result.stderr and "wrong" not in result.stderr


@pytest.mark.parametrize("broker", STOMP_BROKERS)
def test_settle_drains_what_a_run_left_on_its_queues(brokers, broker):
    from harness.experiments.experiment import drain
    from harness.plan.group import group_spec
    from harness.plan.run import RunSpec

    queue = unique("left")
    sender = transport(brokers, broker)
    for seq in range(7):
        sender.send(Destination("queue", queue), message(seq))
    sender.close()
    args = flags(brokers, broker)
    # Client acknowledgement: what the drain takes must be acknowledged, or it comes back.
    given = {"destination": queue, "port": int(args[1]), "flavour": args[3], "ack": "client",
             "vhost": "/" if broker == "rabbitmq" else None}
    run = RunSpec(groups=[group_spec({"module": "stomp.Sender", **given}),
                          group_spec({"module": "stomp.Receiver", "name": "r", **given})])
    assert drain(run) == [f"drained 7 messages left on stomp:{queue}"]
    assert drain(run) == []


def test_a_waiting_receive_returns_when_interrupted(brokers):
    """A pushed consumer's thread waits up to a quarter second at a time; the stop and a lost
    connection interrupt that wait instead of leaving it to its timeout."""
    receiver = transport(brokers, "rabbitmq")
    receiver.subscribe(Destination("topic", unique("interrupt")))
    try:
        returned = []
        waiting = threading.Thread(target=lambda: returned.append(receiver.receive(30.0)))
        waiting.start()
        time.sleep(0.3)
        assert not returned  # still waiting: nothing came
        began = time.monotonic()
        receiver.interrupt()
        waiting.join(5.0)
        assert returned == [None] and time.monotonic() - began < 5.0
    finally:
        receiver.close()


def test_activemq_authorization_admits_refuses_each_send_and_fails_a_subscription_at_once(
        harness, brokers, tmp_path):
    """An ActiveMQ of its own with its simple authentication plugin and per-destination
    authorization: the user's persistent sends where it may write arrive; each persistent
    send where it may not is refused by the broker's ERROR answering its receipt, counted
    once as refused in the broker's words (no outage, nothing in doubt, the next send not
    failed for it); a subscription where it may not read ends the start at once, in one line;
    a wrong password too."""
    secret = env()["MQTT_SECRET"]
    server = SecuredActiveMQ(tmp_path / "activemq", {"bench": (secret, "bench")},
                             [("queue", "bench.>", "bench", "bench"),
                              ("queue", "ro.>", "bench", "nobody")])
    server.start(120)
    login = ["--port", str(server.ports["stomp"]), "--flavour", "activemq", "--user", "bench",
             "--password-env", "MQTT_SECRET"]

    run = login_runs(harness, tmp_path, login, secret)

    try:
        queue = unique("bench.q")
        _, allowed = run("-m", "stomp.Sender", "-d", queue, "-pp", "-rt", "50",
                         "--processes", "2", "-g",
                         f"-m stomp.Receiver -d {queue} {' '.join(login)}")
        denied, refusals = run("-m", "stomp.Sender", "-d", "ro.q", "-pp", "-rt", "50")
        began = time.monotonic()
        unread, _ = run("-m", "stomp.Receiver", "-d", "secret.q")
        took = time.monotonic() - began
        wrong, _ = run("-m", "stomp.Sender", "-d", queue, login=(
            "--port", str(server.ports["stomp"]), "--flavour", "activemq", "--user", "bench",
            "--password", "wrong"))
    finally:
        server.stop()
    assert allowed["delivery"][0]["expected"] == allowed["delivery"][0]["received"] >= 100
    sender = refusals["groups"]["sender"]
    assert sender["sent"] + sender["unsent"] >= 100  # due: sent, or late at the stop
    assert sender["refused"] == sender["errors"] == sender["sent"] > 0
    assert sender["in_doubt"] == sender["reconnects"] == 0
    assert "the broker refused it: User bench is not authorized to write to: queue://ro.q" \
        in denied.stderr
    assert unread.code == 1 and "subscribe to secret.q failed: User bench is not authorized " \
        "to read from: queue://secret.q" in unread.stderr
    assert took < 8  # answered by the broker's error, not by the receipt's timeout
    assert wrong.code == 1 and "password is invalid" in wrong.stderr, wrong.stderr
