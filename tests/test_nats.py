"""The nats transport (nats-py) against a real nats-server with JetStream, started by the
broker script where it does not already run."""

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import nats
import nkeys
import pytest
from harness.modules import transport_class
from harness.modules.interface.base import connect
from harness.modules.interface.message import Destination, Message, unframe
from harness.modules.nats import _Resumed, stream_name

from harness.stats.histogram import decode
from tests.conftest import (
    env,
    free_port,
    harness_command,
    only_run_dir,
    redelivered_beside_a_killed_receiver,
    settings_for,
    unique,
    wait_for_port,
)
from tests.nats_keys import keypair, operator_mode
from tests.servers import NatsConfigured


async def _streams(prefix: str, delete: bool) -> dict[str, dict]:
    nc = await nats.connect("nats://127.0.0.1:4222")
    try:
        jsm = nc.jsm()
        found = {}
        for info in await jsm.streams_info():
            if info.config.name.startswith(prefix):
                # nats-py gives these as enum members or as the server's text
                found[info.config.name] = {"storage": str(getattr(info.config.storage, "value",
                                                                  info.config.storage)),
                                           "retention": str(getattr(info.config.retention,
                                                                    "value",
                                                                    info.config.retention)),
                                           "messages": info.state.messages}
                if delete:
                    await jsm.delete_stream(info.config.name)
        return found
    finally:
        await nc.close()


def streams(prefix: str, delete: bool = False) -> dict[str, dict]:
    """name -> storage, retention and message count of the server's streams whose names start
    with prefix (deleting them after, when asked)."""
    return asyncio.run(_streams(prefix, delete))


@pytest.fixture
def cleanup():
    """Stream name prefixes a test created, deleted after it."""
    prefixes: list[str] = []
    yield prefixes
    for prefix in prefixes:
        streams(prefix, delete=True)


def test_a_publish_begun_off_the_loop_that_waits_is_finished_by_the_loop():
    """A core NATS publish is driven on the worker's thread outside the event loop; one that
    waits after all (_Resumed) is continued by the loop: to its end, or to its failure."""
    loop = asyncio.new_event_loop()
    try:
        steps: list[str] = []
        room = loop.create_future()

        async def publish() -> str:
            steps.append("queued")
            steps.append(await room)
            await asyncio.sleep(0)  # a bare yield, as a loop pass
            return "written"

        begun = publish()
        waiting = begun.send(None)
        assert waiting is room and steps == ["queued"]
        loop.call_soon(room.set_result, "room")
        assert loop.run_until_complete(_Resumed(begun, waiting)) == "written"
        assert steps == ["queued", "room"]

        refused = loop.create_future()

        async def fails() -> None:
            await refused

        begun = fails()
        waiting = begun.send(None)
        loop.call_soon(refused.set_exception, nats.errors.OutboundBufferLimitError())
        with pytest.raises(nats.errors.OutboundBufferLimitError):
            loop.run_until_complete(_Resumed(begun, waiting))
    finally:
        loop.close()


def test_core_nats_every_role_queue_groups_wildcards_and_request_reply(harness, brokers):
    q, t, r = unique("nats.q"), unique("nats.t"), unique("nats.r")
    done = harness(
        "run", "-m", "nats.Sender", "-d", q, "-mg", "600", "-rt", "600", "-ss", "1",
        "-g", f"-m nats.Receiver -d {q} -nt 2",
        "-g", f"-m nats.Publisher -d {t}.a -mg 300 -rt 300",
        "-g", f"-m nats.Subscriber -d {t}.a -nt 2",
        "-g", f"-m nats.Subscriber -gn wildcard -d {t}.*",
        "-g", f"-m nats.Requestor -d {r} -mg 200 -rt 200",
        "-g", f"-m nats.Responder -d {r} -nt 2")
    assert done.code == 0, done.stderr
    g = done.summary["groups"]
    # The queue group shares the messages: each arrived once, at one of the two receivers.
    assert g["sender"]["sent"] == 600 and g["receiver"]["received"] == 600
    assert g["publisher"]["sent"] == 300 and g["subscriber"]["received"] == 600
    assert g["wildcard"]["received"] == 300
    assert g["requestor"]["received"] == 200 and g["responder"]["sent"] == 200
    for name, group in g.items():
        assert group["errors"] == 0 and group["lost"] == 0 and group["duplicated"] == 0, name
    delivery = {d["destination"]: d for d in done.summary["delivery"]}
    assert delivery[f"nats:queue:{q}"]["missing"] == 0
    assert delivery[f"nats:topic:{t}.a"]["expected"] == 600
    # The task that turns each transport's loop ends before its loop closes.
    assert "Task was destroyed" not in done.stderr


@pytest.mark.parametrize("size", ["200", "64k"])
def test_bodies_small_and_large_arrive_whole_behind_the_prefix(harness, brokers, size):
    # The prefix's reader copies a small body and hands a large one on as a view of the
    # payload: either way every byte is checked (--crc 1) and counted.
    t = unique("nats.body")
    done = harness("run", "-m", "nats.Publisher", "-d", t, "-ms", size, "-mg", "300",
                   "-rt", "600", "-ss", "1",
                   "-g", f"-m nats.Subscriber -d {t} --crc 1")
    assert done.code == 0, done.stderr
    subscriber = done.summary["groups"]["subscriber"]
    assert subscriber["received"] == 300 and subscriber["corrupt"] == 0
    assert subscriber["bytes"] == 300 * {"200": 200, "64k": 65536}[size]


def test_properties_and_correlation_ids_go_as_headers_and_prefix_plain_sends_as_frames(
        harness, brokers):
    """A producer with nothing but the prefix's fields hands the transport frames it made
    itself; one with properties or a correlation id sends Messages: either way the server
    delivers what was asked, seen here by a bare nats-py subscriber."""
    plain, rich = unique("nats.plain"), unique("nats.rich")
    seen: dict[str, list[Any]] = {plain: [], rich: []}
    ready, stop = threading.Event(), threading.Event()

    async def listen() -> None:
        nc = await nats.connect("nats://127.0.0.1:4222")
        for subject in seen:
            async def on(msg: Any, subject: str = subject) -> None:
                seen[subject].append((msg.headers, unframe(msg.data)))
            await nc.subscribe(subject, cb=on)
        await nc.flush()
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        await nc.drain()

    listener = threading.Thread(target=asyncio.run, args=(listen(),))
    listener.start()
    try:
        assert ready.wait(10)
        done = harness("run", "-m", "nats.Publisher", "-d", plain, "-mg", "50", "-rt", "200",
                       "-ss", "1", "-g", f"-m nats.Publisher -d {rich} -mg 50 -rt 200 "
                       "--property region=eu --correlation-id order-")
        assert done.code == 0, done.stderr
        time.sleep(0.5)
    finally:
        stop.set()
        listener.join(10)
    assert [m.seq for _, m in seen[plain]] == list(range(50))
    assert all(h is None and m.correlation_id is None for h, m in seen[plain])
    assert [m.seq for _, m in seen[rich]] == list(range(50))
    assert all(h == {"region": "eu"} for h, _ in seen[rich])
    assert {m.correlation_id for _, m in seen[rich]} == {"order-0"}
    assert {m.producer for _, m in seen[plain]} != {m.producer for _, m in seen[rich]}


def test_core_nats_drops_for_a_slow_consumer_and_the_loss_is_counted_exactly(harness,
                                                                            brokers):
    t = unique("nats.slow")
    # Two unthrottled publishers against one subscriber whose nats-py subscription may hold
    # only 20 messages: nats-py drops the rest as a slow consumer. 50,000 messages each, so
    # the subscriber reads through the server's backlog within the drain even on a slow
    # machine (what is still unread when the drain ends is lost too, without an error).
    done = harness("run", "-m", "nats.Publisher", "-d", t, "--processes", "2", "-mg", "50000",
                   "-rl", "20", "-ss", "1",
                   "-g", f"-m nats.Subscriber -d {t} --pending-limit 20")
    assert done.code == 0, done.stderr
    sent = done.summary["groups"]["publisher"]["sent"]
    assert sent == 100_000
    subscriber = done.summary["groups"]["subscriber"]
    assert subscriber["lost"] > 0, "nothing was dropped: the subscriber was not slow"
    assert subscriber["lost"] == sent - subscriber["received"]
    # Every drop nats-py reported is one lost message, and nothing else was lost.
    assert subscriber["errors"] == subscriber["lost"]
    assert "slow consumer" in done.stderr
    (delivery,) = done.summary["delivery"]
    assert delivery["missing"] == subscriber["lost"]


@pytest.fixture
def strict_nats(tmp_path):
    """A nats-server of the test's own that cuts off a client it could not write to for
    200 ms (the default waits 10 s), and its log."""
    port, log = free_port(), tmp_path / "nats-server.log"
    conf = tmp_path / "nats.conf"
    conf.write_text(f'listen: 127.0.0.1:{port}\nwrite_deadline: "200ms"\n')
    proc = subprocess.Popen(["nats-server", "-c", str(conf), "-l", str(log)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    yield port, log
    proc.terminate()
    proc.wait(10)


def measuring(output: Path, seconds: float = 60) -> None:
    """Wait until the run writing into output has written its first interval."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run_dir = only_run_dir(output)
        if run_dir is not None and (run_dir / "intervals.jsonl").exists() and \
                (run_dir / "intervals.jsonl").stat().st_size:
            return
        time.sleep(0.1)
    raise AssertionError(f"no interval from the run in {output} after {seconds:g} s")


def test_a_subscriber_the_server_cuts_off_as_slow_is_reported_with_its_loss(tmp_path, brokers,
                                                                            strict_nats):
    port, log = strict_nats
    t = unique("nats.cut")
    # Two runs of one run id: the subscriber's process group can be frozen on its own, and
    # it checks the publisher's sequence numbers as its run's own.
    common = ["-d", t, "--port", str(port), "--run-id", t.replace("nats.cut.", "cut-"), "-ss", "1"]

    def start(*args: str, **popen: Any) -> subprocess.Popen:
        return subprocess.Popen(harness_command("run", *common, *args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path,
                                **popen)

    subscriber = start("-m", "nats.Subscriber", "-rl", "17", "-o", str(tmp_path / "sub"),
                       start_new_session=True)
    publisher = None
    try:
        measuring(tmp_path / "sub")
        # It publishes for some seconds after the freeze: only a message the subscriber
        # receives after it reconnected (nats-py waits 2 s between attempts, more on a busy
        # machine) reveals the gap, which is the loss.
        publisher = start("-m", "nats.Publisher", "-rt", "20000", "-ms", "1024", "-rl", "9",
                          "-o", str(tmp_path / "pub"))
        measuring(tmp_path / "pub")
        # Frozen, the subscriber reads nothing: the server's writes to it block, and after
        # 200 ms the server closes its connection; what is published meanwhile is gone.
        os.killpg(subscriber.pid, signal.SIGSTOP)
        time.sleep(2)
        os.killpg(subscriber.pid, signal.SIGCONT)
        _, err = publisher.communicate(timeout=60)
        assert publisher.returncode == 0, err
        out, err = subscriber.communicate(timeout=60)
        assert subscriber.returncode == 0, err
    finally:
        for proc in (subscriber, publisher):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "Slow Consumer Detected" in log.read_text(), "the server never cut the subscriber off"
    sent = json.loads((only_run_dir(tmp_path / "pub") / "summary.json").read_text())[
        "groups"]["publisher"]["sent"]
    got = json.loads((only_run_dir(tmp_path / "sub") / "summary.json").read_text())[
        "groups"]["subscriber"]
    # The cut-off is reported (one error, one reconnect), and the subscriber went on after it.
    assert got["reconnects"] >= 1 and 1 <= got["errors"] <= got["reconnects"]
    assert "disconnected error: the connection was lost" in out + err
    assert 0 < got["lost"] < sent - 20000
    # Every message the server threw away is lost, exactly.
    assert got["lost"] == sent - got["received"]
    assert got["duplicated"] == 0


def test_jetstream_push_and_pull_consumers_with_timed_publish_acks(harness, brokers, cleanup):
    q, t = unique("njs.q"), unique("njs.t")
    cleanup += [f"harness-{q.replace('.', '_')}", "harness-nt-"]
    stream_t = f"harness-nt-{t.replace('.', '_')}"
    done = harness(
        "run", "-m", "nats.Sender", "-d", q, "--jetstream", "-mg", "600", "-rt", "600",
        "-ss", "1", "--inflight", "50",
        "-g", f"-m nats.Receiver -d {q} --jetstream -nt 2 --ack client --prefetch 100",
        # Whichever group comes first creates the stream: both ask for the same one.
        "-g", f"-m nats.Publisher -d {t} --jetstream --stream {stream_t} --storage memory "
              "--retention interest -mg 400",
        "-g", f"-m nats.Subscriber -d {t} --jetstream --stream {stream_t} --storage memory "
              "--retention interest --pull-batch 50 --durable-name pull")
    assert done.code == 0, done.stderr
    g = done.summary["groups"]
    assert g["sender"]["sent"] == 600 and g["receiver"]["received"] == 600
    assert g["publisher"]["sent"] == 400 and g["subscriber"]["received"] == 400
    for name, group in g.items():
        assert group["errors"] == 0 and group["lost"] == 0 and group["duplicated"] == 0, name
    # Each publish acknowledgement timed once, in its own histogram.
    for name, sent in (("sender", 600), ("publisher", 400)):
        assert decode(g[name]["histograms"]["confirm"]).get_total_count() == sent
    assert "confirm p50=" in done.stdout
    made = streams("harness-")
    assert made[f"harness-{q.replace('.', '_')}"]["storage"] == "file"
    assert made[f"harness-{q.replace('.', '_')}"]["messages"] == 600
    assert made[stream_t] == {"storage": "memory", "retention": "interest",
                              "messages": made[stream_t]["messages"]}


async def _add_stream(name: str, subject: str) -> None:
    nc = await nats.connect("nats://127.0.0.1:4222")
    try:
        await nc.jetstream().add_stream(name=name, subjects=[subject])
    finally:
        await nc.close()


def test_a_jetstream_producer_waits_for_its_next_send_while_acknowledgements_arrive(brokers,
                                                                                 cleanup):
    # A producer's idle() with publishes awaiting acknowledgement: each is timed as it
    # arrives, and the wait lasts as long as asked (the thread stays in the loop).
    subject = unique("nats.idle")
    cleanup.append(stream_name(subject))
    transport = transport_class("nats")(settings_for("nats.Publisher", destination=subject,
                                                     jetstream=True))
    connect(transport)
    try:
        destination = Destination("topic", subject)
        transport.declare(destination)
        for seq in range(5):
            transport.send(destination, Message(bytes(64), "t", seq, 0, 0))
        transport.flush()
        start = time.perf_counter()
        transport.idle(0.2)
        waited = time.perf_counter() - start
        assert 0.2 <= waited < 0.3
        assert not transport.pending and not transport.feedback.failed
        confirms = list(transport.feedback.confirm_us)
        assert len(confirms) == 5
        assert max(confirms) < 100_000  # as they arrived, not when the wait ended
    finally:
        transport.close()


def test_a_stream_another_client_makes_meanwhile_is_used_as_found(brokers, cleanup):
    # Producers starting at once: another client makes the stream, with another storage,
    # between this one's look (none there) and its own add_stream, which the server refuses.
    subject = unique("nats.race")
    name = stream_name(subject)
    cleanup.append(name)
    transport = transport_class("nats")(settings_for("nats.Sender", destination=subject,
                                                     jetstream=True, storage="memory"))
    connect(transport)
    try:
        add = transport.js.add_stream

        async def made_meanwhile(**config: Any) -> Any:
            await _add_stream(name, subject)  # file storage, the server's default
            return await add(**config)
        transport.js.add_stream = made_meanwhile
        transport.declare(Destination("queue", subject))
        assert transport.send_stream == name
        assert streams(name)[name]["storage"] == "file"
    finally:
        transport.close()


def test_a_publish_stored_in_another_stream_is_refused_not_lost(harness, brokers, cleanup):
    """--stream names an existing stream that does not hold the subject, another stream
    does: the server stores each message there, where the run's consumers never read. Each
    is a refused send, named, and the run's stream receives nothing."""
    subject = unique("njs.other")
    theirs, mine = (f"harness-other-{subject.replace('.', '_')}-{who}"
                    for who in ("theirs", "mine"))
    cleanup.append("harness-other-")
    asyncio.run(_add_stream(theirs, subject))
    asyncio.run(_add_stream(mine, subject + ".elsewhere"))
    done = harness("run", "-m", "nats.Sender", "-d", subject, "--jetstream", "--stream", mine,
                   "-mg", "50", "-rt", "500", "-ss", "1")
    assert done.code == 0, done.stderr
    sender = done.summary["groups"]["sender"]
    assert sender["sent"] == 50 and sender["refused"] == 50
    # The rate counts what the run's stream took: nothing.
    assert sender["taken"] == sender["rate"] == 0 and sender["untaken"] == 50
    assert done.summary["throughput"]["received_by_broker"] == 0
    assert f"stored in stream {theirs}, not {mine}" in done.stdout + done.stderr
    made = streams("harness-other-")
    assert made[theirs]["messages"] == 50 and made[mine]["messages"] == 0


def test_a_request_nobody_subscribes_to_is_answered_no_responders_not_timed_out(harness,
                                                                                 brokers):
    """nats-server answers a request to a subject without subscribers with status 503: each
    is an error at once, its latency the time to that answer, not a reply timeout."""
    done = harness("run", "-m", "nats.Requestor", "-d", unique("nats.nobody"), "-rt", "50",
                   "-rl", "2", "-ss", "1", "--reply-timeout", "5")
    assert done.code == 0, done.stderr
    group = done.summary["groups"]["requestor"]
    assert group["sent"] >= 90 and group["timeouts"] == 0
    assert group["errors"] == group["sent"] and group["received"] == 0
    assert "no responders error: no responders: nothing subscribes to nats.nobody." \
        in done.stderr
    assert group["latency"]["max"] < 1_000_000  # answered well within the 5 s timeout


def test_a_stream_the_server_refuses_to_create_fails_the_start(harness, brokers, cleanup):
    """A producer's stream is made ready before the run: a refusal (here its subject is
    another stream's) is one line and exit 1, not an error on every send."""
    subject = unique("njs.overlap")
    theirs = f"harness-overlap-{subject.replace('.', '_')}"
    cleanup.append("harness-overlap-")
    asyncio.run(_add_stream(theirs, subject))
    done = harness("run", "-m", "nats.Sender", "-d", subject, "--jetstream", "--stream",
                   theirs + "-mine", "-rl", "2", "-rt", "100")
    assert done.code == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # nats-py's tasks closed, not left to complain
    assert f"nats.Sender (sender): cannot start: stream {theirs}-mine: 400 subjects overlap" \
        in lines[0]
    assert theirs + "-mine" not in streams("harness-overlap-")


def test_jetstream_redelivers_what_a_killed_consumer_held_and_counts_it(tmp_path, brokers,
                                                                        cleanup):
    q = unique("njs.redeliver")
    cleanup.append(f"harness-{q.replace('.', '_')}")
    # Both receivers share the durable consumer, which hands a message out again once it has
    # been unacknowledged for a second.
    receiver = ["--jetstream", "--ack-wait", "1", "--prefetch", "200"]
    redelivered_beside_a_killed_receiver(tmp_path, "nats", q, receiver,
                                         ["--jetstream", "-rt", "2000"])
    assert asyncio.run(_ack_pending(f"harness-{q.replace('.', '_')}")) == 0


async def _ack_pending(stream: str) -> int:
    nc = await nats.connect("nats://127.0.0.1:4222")
    try:
        info = await nc.jsm().consumer_info(stream, f"harness-{stream}")
        return info.num_ack_pending
    finally:
        await nc.close()


@pytest.mark.parametrize(("args", "message"), [
    (["-m", "nats.Sender", "-d", "q", "--selector", "a = 1"], "--selector: NATS has no"),
    (["-m", "nats.Sender", "-d", "q", "-pp"], "-pp: core NATS keeps nothing"),
    (["-m", "nats.Sender", "-d", "q", "--stream", "S"], "--stream: is for JetStream"),
    (["-m", "nats.Receiver", "-d", "q", "--ack-wait", "5"], "--ack-wait: is for JetStream"),
    (["-m", "nats.Receiver", "-d", "q", "--ack", "client"],
     "--ack: core NATS has no acknowledgements"),
    (["-m", "nats.Receiver", "-d", "q", "--prefetch", "10"],
     "--prefetch: is JetStream's max-ack-pending"),
    (["-m", "nats.Requestor", "-d", "q", "--jetstream"], "--jetstream: request/reply"),
    (["-m", "nats.Sender", "-d", "q", "--jetstream", "--storage", "memory", "-pp"],
     "-pp: a memory stream does not persist"),
    (["-m", "nats.Sender", "-d", "q", "--jetstream", "--storage", "disk"], "--storage:"),
    (["-m", "nats.Sender", "-d", "q", "--jetstream", "--retention", "forever"],
     "--retention:"),
    (["-m", "nats.Subscriber", "-d", "q", "--jetstream", "--pull-batch", "5"],
     "--pull-batch: a pull Subscriber needs a durable consumer"),
    (["-m", "nats.Sender", "-d", "q", "-tx"], "-tx"),
    # A PUB line's second word is its reply subject: "a b" would publish to "a".
    (["-m", "nats.Sender", "-d", "a b"], "-d: 'a b': a NATS subject takes no white space"),
    (["-m", "nats.Receiver", "-d", "a..b"], "-d: 'a..b': a NATS subject has no empty token"),
    (["-m", "nats.Publisher", "-d", "t.*"], "-d: 't.*': Publisher publishes; wildcards"),
    (["-m", "nats.Requestor", "-d", "svc.>"], "-d: 'svc.>': Requestor publishes; wildcards"),
    (["-m", "nats.Sender", "-d", "q", "--jetstream", "--stream", "a.b"],
     "--stream: 'a.b': a stream name takes no '.'"),
    (["-m", "nats.Sender", "-d", "q", "--token"], "--token: sends the password as the token"),
    (["-m", "nats.Sender", "-d", "q", "--token", "--user", "u", "--password-env",
      "MQTT_SECRET"], "--token: authenticates without a user"),
    (["-m", "nats.Sender", "-d", "q", "--nkey", "/nonexistent/user.nk"],
     "--nkey: cannot read /nonexistent/user.nk: No such file or directory"),
    (["-m", "nats.Sender", "-d", "q", "--nkey", "/etc/hostname"],
     "--nkey: /etc/hostname holds no user nkey seed"),
    # nats-py would read a file without the JWT's marker for ever.
    (["-m", "nats.Sender", "-d", "q", "--creds", "/etc/hostname"],
     "--creds: /etc/hostname is not a credentials file (it has no BEGIN NATS USER JWT"),
    (["-m", "nats.Sender", "-d", "q", "--nkey", "/etc/hostname", "--creds", "/etc/hostname"],
     "--creds: authenticates another way than --nkey"),
])
def test_what_nats_cannot_do_is_refused_before_the_run(harness, args, message):
    done = harness("run", *args, "-rl", "1")
    assert done.code == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.run_dir is None


def test_a_durable_consumer_made_with_another_prefetch_is_refused_not_reused(harness, brokers,
                                                                             cleanup, tmp_path):
    """Receivers share the durable consumer harness-<stream>, which nats-py takes as it
    finds it: a later run asking for another --prefetch (max-ack-pending) or --ack-wait
    would run with the first run's, silently."""
    subject = unique("njs.durable")
    cleanup.append(stream_name(subject))

    def receive(name: str, prefetch: str) -> Any:
        return harness("run", "-m", "nats.Receiver", "-d", subject, "--jetstream",
                       "--prefetch", prefetch, "--ack", "client", "-rl", "1", "-ss", "1",
                       "-o", str(tmp_path / name), output=False)

    first = receive("first", "10")
    assert first.code == 0, first.stderr
    same = receive("same", "10")
    assert same.code == 0, same.stderr
    other = receive("other", "20")
    assert other.code == 1
    durable = f"harness-{stream_name(subject)}"
    assert f"--prefetch 20: the durable consumer {durable} on stream {stream_name(subject)} " \
           "exists with 10" in other.stderr


@pytest.mark.parametrize("way", ["token", "nkey", "creds"])
def test_a_server_that_admits_a_token_an_nkey_or_a_credentials_file_is_reached(
        harness, brokers, tmp_path, way):
    """A nats-server of the test's own that admits one way in: a Sender and a Receiver
    authenticated that way move every message; the run without it is turned away at the
    start in a line that says why; the secret is in nothing the run printed or wrote."""
    if way == "token":
        secret = env()["MQTT_SECRET"]
        conf, flags = f'authorization {{ token: "{secret}" }}\n', \
            "--token --password-env MQTT_SECRET"
    elif way == "nkey":
        seed, public = keypair(nkeys.PREFIX_BYTE_USER)
        secret = seed.decode()
        (tmp_path / "user.nk").write_text(secret + "\n")
        conf, flags = f"authorization {{ users = [ {{ nkey: {public} }} ] }}\n", \
            f"--nkey {tmp_path / 'user.nk'}"
    else:
        conf, creds = operator_mode(tmp_path)
        secret = re.search(r"^SU\S+", creds.read_text(), re.M)[0]
        flags = f"--creds {creds}"
    server = NatsConfigured(tmp_path / "server", conf)
    server.start()
    try:
        subject, port = unique("nauth"), str(server.ports["nats"])
        done = harness("run", "-m", "nats.Sender", "-d", subject, "--port", port,
                       *flags.split(), "-rt", "100", "--processes", "2", "-rl", "2", "-sw", "0",
                       "-ss", "1", "-g",
                       f"-m nats.Receiver -d {subject} --port {port} {flags}", timeout=60)
        refused = harness("run", "-m", "nats.Sender", "-d", subject, "--port", port, "-rl",
                          "1", "-o", str(tmp_path / "refused"), timeout=60, output=False)
    finally:
        server.stop()
    assert done.code == 0, done.stderr
    delivery = done.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] >= 200 and delivery["missing"] == 0
    assert refused.code != 0 and "Authorization Violation" in refused.stderr
    assert "Traceback" not in refused.stderr
    printed = done.stdout + done.stderr
    assert secret not in printed
    for path in done.run_dir.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path
