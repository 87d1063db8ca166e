"""The amqp (AMQP 0-9-1 through pika) and amqp10 (AMQP 1.0 through Proton) transports against
a real RabbitMQ (its AMQP 1.0 plugin enabled by the broker script)."""

import json
import subprocess
import time

import pika
import pytest
from harness.modules.amqp import AmqpTransport
from harness.modules.interface.base import connect
from harness.modules.interface.message import Destination, Message

from harness.stats.histogram import decode
from tests.conftest import (
    env,
    harness_command,
    login_runs,
    rabbitmq_queues,
    settings_for,
    unique,
)
from tests.servers import SecuredRabbitMQ


def depth(queue: str) -> int:
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    try:
        return connection.channel().queue_declare(queue, passive=True).method.message_count
    finally:
        connection.close()


def test_every_role_with_competing_receivers_and_both_reply_paths(harness, brokers):
    q, t, r = unique("amqp.q"), unique("amqp.t"), unique("amqp.r")
    done = harness(
        "run", "-m", "amqp.Sender", "-d", q, "-mg", "600", "-rt", "600", "-ss", "1",
        "-g", f"-m amqp.Receiver -d {q} -nt 2 --ack client --ack-every 7 --prefetch 50",
        "-g", f"-m amqp.Publisher -d {t} -mg 300 -rt 300",
        "-g", f"-m amqp.Subscriber -d {t} -nt 2",
        "-g", f"-m amqp.Requestor -gn direct -d {r} -mg 150 -rt 150",
        "-g", f"-m amqp.Requestor -gn named -d {r} -mg 150 -rt 150 --reply-queue {r}.reply",
        "-g", f"-m amqp.Responder -d {r}")
    assert done.code == 0, done.stderr
    g = done.summary["groups"]
    assert g["sender"]["sent"] == 600 and g["receiver"]["received"] == 600
    assert g["publisher"]["sent"] == 300 and g["subscriber"]["received"] == 600
    # Each request answered once: through direct reply-to and through a named reply queue.
    assert g["direct"]["received"] == 150 and g["named"]["received"] == 150
    assert g["responder"]["received"] == 300 and g["responder"]["sent"] == 300
    for name, group in g.items():
        assert group["errors"] == 0 and group["lost"] == 0, (name, done.stderr)
    delivery = {d["destination"]: d for d in done.summary["delivery"]}
    assert delivery[f"amqp:queue:{q}"]["missing"] == 0
    assert delivery[f"amqp:queue:{q}"]["duplicated"] == 0
    assert delivery[f"amqp:topic:{t}"]["expected"] == 600
    assert delivery[f"amqp:topic:{t}"]["missing"] == 0


def test_publisher_confirms_lose_nothing_and_are_timed(harness, brokers):
    q = unique("amqp.confirm")
    done = harness("run", "-m", "amqp.Sender", "-d", q, "-pp", "--confirm", "20", "-mg", "2000",
                   "-rt", "2000", "-ss", "1", "-g",
                   f"-m amqp.Receiver -d {q} --ack client-individual --prefetch 100")
    assert done.code == 0, done.stderr
    sender, receiver = done.summary["groups"]["sender"], done.summary["groups"]["receiver"]
    assert sender["sent"] == receiver["received"] == 2000
    assert sender["errors"] == sender["refused"] == 0
    # Every send's confirmation is timed, in a histogram of its own.
    confirm = decode(sender["histograms"]["confirm"])
    assert confirm.get_total_count() == 2000
    assert confirm.get_value_at_percentile(50) > 0
    assert "publisher confirms p50" in done.stdout


def test_quorum_queue(harness, brokers):
    q = unique("amqp.quorum")
    done = harness("run", "-m", "amqp.Sender", "-d", q, "--queue-type", "quorum", "-pp",
                   "--confirm", "50", "-mg", "500", "-rt", "1000", "-ss", "1", "-g",
                   f"-m amqp.Receiver -d {q} --queue-type quorum --ack client-individual "
                   "--prefetch 50")
    assert done.code == 0, done.stderr
    assert done.summary["groups"]["receiver"]["received"] == 500
    assert done.summary["groups"]["receiver"]["lost"] == 0
    assert rabbitmq_queues()[q][0] == "quorum"


@pytest.mark.parametrize("role", ["Sender", "Requestor"])
def test_a_declaration_the_broker_refuses_fails_the_start(harness, brokers, role):
    """A producer declares its queue before the run: one the broker refuses (here, a
    classic queue asked for as a quorum queue) is one line and exit 1, not an error on
    every send."""
    q = unique("amqp.inequivalent")
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    try:
        connection.channel().queue_declare(q, auto_delete=False)
        done = harness("run", "-m", f"amqp.{role}", "-d", q, "--queue-type", "quorum",
                       "-rl", "2", "-rt", "100")
    finally:
        connection.channel().queue_delete(q)
        connection.close()
    assert done.code == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"amqp.{role} ({role.lower()}): cannot start: declare queue {q}: 406 " \
        "PRECONDITION_FAILED" in lines[0]


def test_amqp10_an_address_the_broker_refuses_fails_the_start(harness, brokers):
    address = f"/exchanges/{unique('amqp10.missing')}"
    done = harness("run", "-m", "amqp10.Sender", "-d", address, "-rl", "2", "-rt", "100")
    assert done.code == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"amqp10.Sender (sender): cannot start: cannot send to {address}" in lines[0]


def test_stream_queue_consumer_starts_at_the_offset_asked(harness, brokers, tmp_path):
    q = unique("amqp.stream")
    first = harness("run", "-m", "amqp.Sender", "-d", q, "--queue-type", "stream", "-mg", "300",
                    "-rt", "1000", "-ss", "1")
    assert first.code == 0, first.stderr
    assert rabbitmq_queues()[q][0] == "stream"
    # A later run's consumer reads the stream from its start: the earlier run's messages,
    # counted as foreign (not this run's producers'), not timed.
    again = harness("run", "-m", "amqp.Receiver", "-d", q, "--queue-type", "stream",
                    "--stream-offset", "first", "--ack", "client", "--prefetch", "100",
                    "-mg", "300", "-ss", "1", "-o", str(tmp_path / "again"), output=False)
    assert again.code == 0, again.stderr
    (run_dir,) = (tmp_path / "again").iterdir()
    receiver = json.loads((run_dir / "summary.json").read_text())["groups"]["receiver"]
    assert receiver["received"] == receiver["foreign"] == 300


def test_exchange_types_route_as_declared(harness, brokers):
    base = unique("amqp.x")
    topic, fanout, headers = f"{base}.topic", f"{base}.fanout", f"{base}.headers"
    done = harness(
        "run", "-m", "amqp.Publisher", "-gn", "to-topic", "-d", base, "--exchange", topic,
        "--exchange-type", "topic", "--routing-key", "orders.eu", "-mg", "200", "-rt", "400",
        "-ss", "1",
        "-g", f"-m amqp.Subscriber -gn star -d {base} --exchange {topic} --exchange-type topic "
              "--routing-key orders.*",
        "-g", f"-m amqp.Subscriber -gn us -d {base} --exchange {topic} --exchange-type topic "
              "--routing-key orders.us",
        "-g", f"-m amqp.Publisher -gn to-fanout -d {base}.f --exchange {fanout} "
              "--exchange-type fanout -mg 200 -rt 400",
        "-g", f"-m amqp.Subscriber -gn all -d {base}.f --exchange {fanout} "
              "--exchange-type fanout -nt 2",
        "-g", f"-m amqp.Publisher -gn to-headers -d {base}.h --exchange {headers} "
              "--exchange-type headers --property region=eu -mg 200 -rt 400",
        "-g", f"-m amqp.Subscriber -gn eu -d {base}.h --exchange {headers} "
              "--exchange-type headers --bind-arg x-match=all --bind-arg region=eu",
        "-g", f"-m amqp.Subscriber -gn elsewhere -d {base}.h --exchange {headers} "
              "--exchange-type headers --bind-arg region=us")
    assert done.code == 0, done.stderr
    received = {name: g["received"] for name, g in done.summary["groups"].items()}
    assert received["star"] == 200 and received["us"] == 0
    assert received["all"] == 400  # a fanout gives every queue bound to it a copy
    assert received["eu"] == 200 and received["elsewhere"] == 0
    # A binding that routes by more than the name sees part of what is sent there: not
    # counted as loss.
    assert all(g["lost"] == 0 for g in done.summary["groups"].values())


def test_returned_mandatory_messages_count_as_failed_sends(harness, brokers):
    exchange = unique("amqp.nowhere")
    done = harness("run", "-m", "amqp.Sender", "-d", "unbound", "--exchange", exchange,
                   "--mandatory", "--confirm", "10", "-mg", "100", "-rt", "500", "-ss", "1")
    assert done.code == 0, done.stderr
    sender = done.summary["groups"]["sender"]
    assert sender["sent"] == 100
    assert sender["errors"] == sender["refused"] == 100
    assert "NO_ROUTE" in done.stdout + done.stderr
    # The group's rate and count are what the broker took: none of it.
    assert sender["taken"] == sender["count"] == sender["rate"] == 0
    assert sender["untaken"] == 100 and done.summary["throughput"]["received_by_broker"] == 0


def dead_lettered_queue(q: str) -> tuple[str, dict[str, str]]:
    """Declares q with a dead-letter queue of its own; (that queue, q's arguments)."""
    dlq = f"{q}.dead"
    arguments = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    try:
        channel = connection.channel()
        channel.queue_declare(dlq, durable=True)
        channel.queue_declare(q, durable=True, arguments=arguments)
    finally:
        connection.close()
    return dlq, arguments


def test_a_request_without_reply_to_is_refused_and_dead_lettered_not_requeued(harness,
                                                                               brokers):
    # A Sender's messages carry no reply-to: a Responder can never answer them, and giving
    # them back to the queue would loop; they go to the queue's dead letters.
    q = unique("amqp.noreply")
    dlq, arguments = dead_lettered_queue(q)
    declare = [f"--queue-arg={k}={v}" for k, v in arguments.items()]
    done = harness("run", "-m", "amqp.Sender", "-d", q, "-mg", "40", "-rt", "200", "-ss", "1",
                   *declare, "-g", " ".join(["-m amqp.Responder -d", q, "--ack",
                                             "client-individual", *declare]))
    assert done.code == 0, done.stderr
    responder = done.summary["groups"]["responder"]
    assert responder["received"] == 40 and responder["errors"] == 40
    assert responder["sent"] == 0
    assert depth(q) == 0 and depth(dlq) == 40


def test_amqp10_a_request_without_reply_to_is_rejected_and_dead_lettered(harness, brokers):
    import proton
    import proton.utils
    q = unique("amqp10.noreply")
    dlq, _ = dead_lettered_queue(q)
    connection = proton.utils.BlockingConnection("amqp://127.0.0.1:5672")
    sender = connection.create_sender(f"/amq/queue/{q}")
    for _ in range(20):
        sender.send(proton.Message(body=b"no reply-to"))
    connection.close()
    # An address with a slash is taken as the broker names it: the queue declared above.
    done = harness("run", "-m", "amqp10.Responder", "-d", f"/amq/queue/{q}", "-rl", "3")
    assert done.code == 0, done.stderr
    responder = done.summary["groups"]["responder"]
    assert responder["received"] == 20 and responder["errors"] == 20
    assert depth(q) == 0 and depth(dlq) == 20


def requests_replying_to_a_full_queue(q: str, count: int) -> tuple[str, list[str]]:
    """count requests in q (dead-lettered) whose reply-to is a full queue that refuses more
    (reject-publish): every reply will be nacked. (The full queue, the flags that declare q
    as it is.)"""
    full = f"{q}.full"
    _, arguments = dead_lettered_queue(q)
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    try:
        channel = connection.channel()
        channel.queue_declare(full, durable=True, arguments={"x-max-length": 1,
                                                             "x-overflow": "reject-publish"})
        channel.basic_publish("", full, b"filler")
        for n in range(count):
            channel.basic_publish("", q, f"request {n}".encode(),
                                  pika.BasicProperties(reply_to=full))
    finally:
        connection.close()
    return full, [f"--queue-arg={k}={v}" for k, v in arguments.items()]


@pytest.mark.parametrize("requeue", [True, False], ids=["requeued", "dead-lettered"])
def test_a_refused_reply_gives_its_request_back(harness, brokers, requeue):
    # With --confirm a Responder acknowledges a request only once its reply is confirmed;
    # RabbitMQ nacks a reply to a full reject-publish queue, so the request is given back:
    # delivered again with --requeue, dead-lettered with --no-requeue.
    q = unique("amqp.refusedreply")
    full, declare = requests_replying_to_a_full_queue(q, 5)
    done = harness("run", "-m", "amqp.Responder", "-d", q, *declare, "--ack", "client-individual",
                   "--confirm", "1", "--requeue" if requeue else "--no-requeue", "-rl", "2",
                   "--drain", "0")
    assert done.code == 0, done.stderr
    responder = done.summary["groups"]["responder"]
    assert responder["sent"] == 0 and responder["errors"] == responder["received"]
    assert "the broker refused the message" in done.stdout + done.stderr
    assert depth(full) == 1
    if requeue:
        assert responder["received"] > 5 and responder["redelivered"] == \
            responder["received"] - 5
        assert depth(q) == 5 and depth(f"{q}.dead") == 0
    else:
        assert responder["received"] == 5 and responder["redelivered"] == 0
        assert depth(q) == 0 and depth(f"{q}.dead") == 5


def test_amqp10_a_reply_the_broker_refuses_by_ending_the_session_is_survived(harness,
                                                                            brokers):
    # RabbitMQ answers a link to a missing exchange by ending the whole session, the
    # Responder's receiver with it: the Responder must say why, connect again and receive
    # again, and the request, never settled, goes back to the queue and is counted as
    # delivered again.
    import proton
    import proton.utils
    q = unique("amqp10.badreply")
    dead_lettered_queue(q)
    connection = proton.utils.BlockingConnection("amqp://127.0.0.1:5672")
    sender = connection.create_sender(f"/amq/queue/{q}")
    sender.send(proton.Message(body=b"request", reply_to=f"/exchange/{q}.missing/key"))
    connection.close()
    done = harness("run", "-m", "amqp10.Responder", "-d", f"/amq/queue/{q}", "-rl", "2",
                   "--drain", "0")
    assert done.code == 0, done.stderr
    responder = done.summary["groups"]["responder"]
    assert "the broker ended the session: NOT_FOUND" in done.stdout + done.stderr
    assert responder["reconnects"] >= 1 and responder["received"] >= 2
    # An error for each failed reply, and one for each outage, not one per poll while down.
    assert responder["received"] <= responder["errors"] <= \
        responder["received"] + responder["reconnects"] + 1
    assert responder["redelivered"] == responder["received"] - 1
    assert depth(q) == 1


def test_amqp_messages_delivered_again_are_counted(harness, brokers):
    # Taken by a consumer that closed without acknowledging them: RabbitMQ marks them
    # redelivered.
    q = unique("amqp.redelivered")
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    channel = connection.channel()
    channel.queue_declare(q, durable=True)  # as the harness declares its queues
    for n in range(10):
        channel.basic_publish("", q, f"message {n}".encode())
    channel.basic_qos(prefetch_count=4)
    taken = []
    channel.basic_consume(q, lambda ch, method, props, body: taken.append(body))
    while len(taken) < 4:
        connection.process_data_events(time_limit=1)
    connection.close()
    done = harness("run", "-m", "amqp.Receiver", "-d", q, "-rl", "2", "--drain", "0")
    assert done.code == 0, done.stderr
    receiver = done.summary["groups"]["receiver"]
    assert receiver["received"] == 10 and receiver["redelivered"] == 4


def test_a_transaction_shows_nothing_before_its_commit(brokers):
    q = unique("amqp.tx")
    transport = AmqpTransport(settings_for("amqp.Sender", transacted=True))
    connect(transport)
    try:
        transport.begin()
        for seq in range(5):
            transport.send(Destination("queue", q), Message(b"x", "tester", seq, 0, 0))
        transport.flush()
        time.sleep(0.3)
        assert depth(q) == 0
        transport.commit()
        assert depth(q) == 5
    finally:
        transport.close()


def test_transacted_run_commits_every_cc(harness, brokers):
    q = unique("amqp.txrun")
    done = harness("run", "-m", "amqp.Sender", "-d", q, "-tx", "-cc", "10", "-mg", "300",
                   "-rt", "600", "-ss", "1", "-g", f"-m amqp.Receiver -d {q} -tx -cc 7")
    assert done.code == 0, done.stderr
    sender, receiver = done.summary["groups"]["sender"], done.summary["groups"]["receiver"]
    assert sender["commits"] == 30
    assert receiver["received"] == 300 and receiver["lost"] == 0
    assert receiver["commits"] == 43  # 42 of 7 and the remainder at the end


def test_amqp10_every_role_settled_and_presettled(harness, brokers):
    q, p, t, r = (unique(f"amqp10.{k}") for k in "qptr")
    done = harness(
        # Rates well below what a settled send's round trip allows on two cores shared by
        # eight processes and the broker: a producer that starts late catches up before its
        # schedule ends (the run stops there; what is still due then counts as unsent).
        "run", "-m", "amqp10.Sender", "-d", q, "-mg", "300", "-rt", "100", "-ss", "1",
        "--confirm", "10",
        "-g", f"-m amqp10.Receiver -d {q}",
        "-g", f"-m amqp10.Sender -gn presettled -d {p} -mg 300 -rt 100 --settle at-most-once",
        "-g", f"-m amqp10.Receiver -gn takes-presettled -d {p} --settle at-most-once",
        "-g", f"-m amqp10.Publisher -d {t} -mg 200 -rt 100",
        "-g", f"-m amqp10.Subscriber -d {t} -nt 2",
        "-g", f"-m amqp10.Requestor -d {r} -mg 100 -rt 50",
        "-g", f"-m amqp10.Responder -d {r}")
    assert done.code == 0, done.stderr
    g = done.summary["groups"]
    assert g["sender"]["sent"] == g["receiver"]["received"] == 300
    assert decode(g["sender"]["histograms"]["confirm"]).get_total_count() == 300
    assert g["presettled"]["sent"] == g["takes-presettled"]["received"] == 300
    assert "confirm" not in g["presettled"]
    assert g["subscriber"]["received"] == 400
    assert g["requestor"]["received"] == 100 and g["responder"]["sent"] == 100
    for name, group in g.items():
        assert group["errors"] == 0 and group["lost"] == 0, (name, done.stderr)


def test_amqp10_sends_carry_durability_correlation_and_reply_to_only_when_they_have_them(
        harness, brokers):
    import proton.utils
    q, r = unique("amqp10.fields"), unique("amqp10.fieldsr")
    done = harness("run", "-m", "amqp10.Sender", "-d", q, "-mg", "2", "-pp", "-ss", "1",
                   "-g", f"-m amqp10.Sender -gn plain -d {q} -mg 2",
                   "-g", f"-m amqp10.Requestor -d {r} -mg 2 --reply-timeout 0.5")
    assert done.code == 0, done.stderr
    import proton.reactor

    class Durable(proton.reactor.LinkOption):
        """As the harness's links ask: RabbitMQ declares the queue on the attach, and refuses
        a durability other than the queue's."""

        def apply(self, link: proton.Link) -> None:
            link.source.durability = proton.Terminus.CONFIGURATION

    connection = proton.utils.BlockingConnection("amqp://127.0.0.1:5672")
    try:
        seen: dict[str, list[tuple[bool, object, object]]] = {}
        for name in (q, r):
            receiver = connection.create_receiver(f"/queue/{name}", credit=10,
                                                  options=Durable())
            for _ in range(4 if name == q else 2):
                message = receiver.receive(timeout=10)
                producer = message.properties["harness"].split(",", 4)[4]
                group = producer.split(":")[-3]  # run:host:group:process:thread
                seen.setdefault(group, []).append(
                    (message.durable, message.correlation_id, message.reply_to))
                receiver.accept()
    finally:
        connection.close()
    assert seen["sender"] == [(True, None, None)] * 2
    assert seen["plain"] == [(False, None, None)] * 2
    requests = seen["requestor"]
    assert [durable for durable, _, _ in requests] == [False, False]
    # Each request names its producer and number, and where to reply.
    assert [str(c).rsplit(":", 1)[1] for _, c, _ in requests] == ["0", "1"]
    assert all(reply for _, _, reply in requests)


@pytest.mark.parametrize(("args", "flag", "words"), [
    (["-m", "amqp.Receiver", "-d", "q", "--selector", "a = 1"], "--selector",
     "headers exchange"),
    (["-m", "amqp.Receiver", "-d", "q", "--queue-type", "stream"], "--queue-type",
     "--prefetch"),
    (["-m", "amqp.Receiver", "-d", "q", "--queue-type", "lazy"], "--queue-type",
     "classic, quorum, stream"),
    (["-m", "amqp.Subscriber", "-d", "t", "--queue-type", "quorum"], "--queue-type",
     "--durable-name"),
    (["-m", "amqp.Receiver", "-d", "q", "--queue-type", "quorum", "--exclusive"],
     "--queue-type", "exclusive"),
    (["-m", "amqp.Sender", "-d", "q", "--confirm", "5", "-tx"], "--confirm", "transactional"),
    (["-m", "amqp.Receiver", "-d", "q", "--confirm", "5"], "--confirm", "Sender"),
    (["-m", "amqp.Receiver", "-d", "q", "--ack", "auto", "--prefetch", "10"], "--prefetch",
     "with --ack auto there are none"),
    (["-m", "amqp.Receiver", "-d", "q", "--ack", "client", "--ack-every", "100",
      "--prefetch", "10"], "--ack-every", "100 is more than --prefetch 10"),
    (["-m", "amqp.Sender", "-d", "q", "--routing-key", "other"], "--routing-key",
     "the default exchange routes to the queue -d names"),
    (["-m", "amqp.Publisher", "-d", "t", "--exchange", "amq.direct", "--exchange-type",
      "fanout"], "--exchange-type", "amq.direct is the broker's own direct exchange"),
    (["-m", "amqp.Sender", "-d", "q", "--exchange-type", "fanout"], "--exchange-type",
     "--exchange"),
    (["-m", "amqp.Sender", "-d", "q", "--exchange", "x", "--exchange-type", "random"],
     "--exchange-type", "direct, topic"),
    (["-m", "amqp.Receiver", "-d", "q", "--queue-arg", "x-max-length"], "--queue-arg",
     "key=value"),
    (["-m", "amqp.Receiver", "-d", "q", "--ack", "sometimes"], "--ack", "auto"),
    (["-m", "amqp.Requestor", "-d", "q", "--flavour", "generic"], "--reply-queue",
     "direct reply-to"),
    (["-m", "amqp.Sender", "-d", "q", "--protocol", "1.0"], "--protocol", "amqp10"),
    (["-m", "amqp10.Receiver", "-d", "q", "--selector", "a = 1"], "--selector",
     "ignores selector"),
    (["-m", "amqp10.Subscriber", "-d", "t", "--durable-name", "d"], "--durable-name",
     "activemq or artemis"),
    (["-m", "amqp10.Sender", "-d", "q", "-tx"], "-tx", "no transactions"),
    (["-m", "amqp10.Sender", "-d", "q", "--settle", "at-most-once", "--confirm", "3"],
     "--confirm", "presettled"),
    (["-m", "amqp10.Sender", "-d", "q", "--settle", "twice"], "--settle", "at-least-once"),
    (["-m", "amqp.Responder", "-d", "q", "--no-requeue"], "--no-requeue", "--ack client"),
    (["-m", "amqp10.Responder", "-d", "q", "--no-requeue", "--settle", "at-most-once"],
     "--no-requeue", "presettled"),
    (["-m", "stomp.Sender", "-d", "q", "--exchange", "x"], "--exchange", "only amqp"),
])
def test_what_a_transport_cannot_do_is_refused_before_the_run(harness, args, flag, words):
    done = harness("run", *args, "-rl", "1")
    assert done.code != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"harness: error: {flag}:"), done.stderr
    assert words in lines[0]
    assert done.run_dir is None


def test_the_screen_shows_the_confirm_times_the_summary_has(harness, brokers):
    import asyncio

    from textual.widgets import Static

    from harness.rundir.reader import load
    from harness.screen.app import RunApp
    from harness.screen.replay import ReplayFeed
    from harness.units import format_us

    q = unique("amqp.screen")
    done = harness("run", "-m", "amqp.Sender", "-d", q, "--confirm", "10", "-rt", "500",
                   "-rl", "3", "-ss", "1", "-g", f"-m amqp.Receiver -d {q}")
    assert done.code == 0, done.stderr
    feed = ReplayFeed(done.run_dir, load(done.run_dir))
    app = RunApp(feed)
    rows: dict[str, list[str]] = {}

    async def main() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("end")
            await pilot.pause(0.3)
            panel = app.query_one("#percentiles", Static).content
            columns = [list(column.cells) for column in panel.columns]
            for i, label in enumerate(columns[0]):
                rows[str(label)] = [str(c[i]) for c in columns[1:]]

    asyncio.run(main())
    confirm = done.summary["groups"]["sender"]["confirm"]
    assert rows["confirm cumul."] == [format_us(confirm[k]) for k in
                                      ("p50", "p90", "p99", "p99.9", "max")]


def test_a_publish_the_users_permissions_forbid_is_refused_in_the_brokers_words(
        harness, brokers, tmp_path):
    """A RabbitMQ node of its own whose user may write only to the default exchange and
    bench* (RabbitMQ's permissions): its sends there arrive; each publish to amq.topic is
    refused by the broker, which closes the channel (403 ACCESS_REFUSED), and is counted
    once as refused with the broker's words, with or without confirms, and no outage (the
    connection was never down: a channel on it is opened again for the next send); a wrong
    password ends the start in one line."""
    secret = env()["MQTT_SECRET"]
    server = SecuredRabbitMQ(tmp_path / "rabbitmq", {
        "bench": (secret, ".*", r"^(amq\.default|bench.*)$", ".*")})
    server.start(120)
    login = ["--port", str(server.ports["amqp"]), "--user", "bench", "--password-env",
             "MQTT_SECRET"]

    run = login_runs(harness, tmp_path, login, secret)

    try:
        queue = unique("bench.q")
        _, allowed = run("-m", "amqp.Sender", "-d", queue, "-rt", "50", "--processes", "2",
                         "-g",
                         f"-m amqp.Receiver -d {queue} {' '.join(login)}")
        plain, refused = run("-m", "amqp.Publisher", "-d", "bench.t", "-rt", "50")
        _, confirmed = run("-m", "amqp.Publisher", "-d", "bench.t", "-rt", "50",
                           "--confirm", "10")
        wrong, _ = run("-m", "amqp.Sender", "-d", queue, login=(
            "--port", str(server.ports["amqp"]), "--user", "bench", "--password", "wrong"))
    finally:
        server.stop()
    assert allowed["delivery"][0]["expected"] == allowed["delivery"][0]["received"] >= 100
    for summary in (refused, confirmed):
        publisher = summary["groups"]["publisher"]
        assert publisher["sent"] + publisher["unsent"] >= 100  # due: sent, or late
        # One refused a channel (its last send); a send the channel carried before it, in
        # doubt (_refuse_channel): none taken.
        assert publisher["refused"] == publisher["errors"] >= 10
        assert publisher["refused"] + publisher["in_doubt"] == publisher["sent"]
        assert publisher["reconnects"] == publisher["outage_ms"] == 0
        assert summary["throughput"]["received_by_broker"] == 0
    assert plain.code == 0 and "the broker refused access: 403 ACCESS_REFUSED - access to " \
        "exchange 'amq.topic' in vhost '/' refused for user 'bench'" in plain.stderr
    assert wrong.code == 1 and "cannot connect" in wrong.stderr, wrong.stderr


@pytest.mark.parametrize("confirm", [0, 5])
def test_a_channel_closed_refusing_a_send_refuses_its_last_and_doubts_the_rest(confirm):
    """The close says that one of the channel's unconfirmed sends was refused, not which: the
    broker took those before it and ignored those after. The last is refused either way;
    the others may have been taken (a consumer may receive them), so they are in doubt,
    never refused. A channel that carried one send refuses exactly that one."""
    transport = AmqpTransport(settings_for("amqp.Publisher", confirm=confirm))
    for sends in ([7], [7, 8, 9, 10]):
        if confirm:
            transport.pending.extend((tag, seq, 0) for tag, seq in enumerate(sends, 1))
        else:
            transport.channel_first, transport.channel_last = sends[0], sends[-1]
        transport._refuse_channel("403 ACCESS_REFUSED")
        _, failed, doubt, _ = transport.feedback.take()
        assert [(seq, kind) for seq, kind, _ in failed] == [(sends[-1], "refused")]
        assert [seq for seq, _ in doubt] == sends[:-1]
        assert all("403 ACCESS_REFUSED" in why for _, why in doubt)
        assert not transport.pending and transport.channel_first == -1


@pytest.mark.parametrize("module", ["amqp", "amqp10"])
def test_sends_whose_confirms_a_fault_hid_are_in_doubt_and_none_failed(brokers, tmp_path,
                                                                      module):
    """The broker takes a producer's persistent sends but its confirms never come back (a
    proxy holds its answers), then the connection is cut: every send that awaited its
    confirm, the one whose call found the connection gone among them, is in doubt and none
    is counted failed, so that their arrival is neither unexpected nor a loss."""
    from tests.cutter import Cutter
    from tests.test_fault_matrix import wait_running

    queue = unique("doubt")
    flavour = ["--flavour", "rabbitmq"] if module == "amqp10" else []
    cutter = Cutter(("127.0.0.1", 5672))
    out = tmp_path / "runs"
    proc = subprocess.Popen(harness_command(
        "run", "-m", f"{module}.Sender", "-d", queue, "-pp", "--confirm", "20", "--port",
        str(cutter.port), *flavour, "-rt", "100", "-rl", "7", "-ss", "1", "--drain", "5",
        "-g", " ".join([f"-m {module}.Receiver -d", queue, "--port 5672", *flavour]),
        "-o", str(out)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env())
    try:
        wait_running(out, proc)
        time.sleep(1)
        cutter.mute(1)  # the producer's connection: its sends arrive, the confirms not
        time.sleep(1.5)
        cutter.cut(0.5)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
        cutter.close()
    assert proc.returncode == 0, stderr
    summary = json.loads(next(out.glob("*/summary.json")).read_text())
    sender, (delivery,) = summary["groups"]["sender"], summary["delivery"]
    assert sender["reconnects"] >= 1 and sender["in_doubt"] >= 20, sender
    assert delivery["in_doubt"] == sender["in_doubt"]
    assert delivery["unexpected"] == delivery["missing"] == 0, delivery
    assert delivery["received"] >= delivery["expected"] > 300
