"""The redis transport (redis-py) against a real redis-server, started by the broker script
where it does not already run."""

import json
import threading
import time

import pytest
import redis
from harness.modules.interface.base import connect
from harness.modules.interface.message import Destination, Message
from harness.modules.redis import RedisTransport

from tests.conftest import (
    MADE,
    beside_a_killed_consumer,
    env,
    harness_command,
    login_runs,
    ours,
    read_jsonl,
    settings_for,
    unique,
)
from tests.servers import SecuredRedis


@pytest.fixture
def server(brokers):
    """A client of the server; the keys a test made are deleted after it."""
    client = redis.Redis()
    before, since = set(client.keys()), len(MADE)
    yield client
    made = {k for k in set(client.keys()) - before if ours(k.decode(), since)}
    if made:
        client.delete(*made)
    client.close()


def test_every_role_on_channels_patterns_and_streams(harness, server):
    q, t, s, r = unique("rq"), unique("rt"), unique("rs"), unique("rr")
    done = harness(
        "run", "-m", "redis.Sender", "-d", q, "-mg", "600", "-rt", "600", "-ss", "1",
        "-g", f"-m redis.Receiver -d {q} -nt 2 --prefetch 50",
        "-g", f"-m redis.Publisher -d {t}.a -mg 300 -rt 300",
        "-g", f"-m redis.Subscriber -d {t}.a -nt 2",
        "-g", f"-m redis.Subscriber -gn pattern -d {t}.*",
        "-g", f"-m redis.Publisher -gn spub -d {s} --streams -mg 300 -rt 300",
        "-g", f"-m redis.Subscriber -gn ssub -d {s} --streams -nt 2",
        "-g", f"-m redis.Requestor -d {r} -mg 200 -rt 200",
        "-g", f"-m redis.Responder -d {r} -nt 2")
    assert done.code == 0, done.stderr
    g = done.summary["groups"]
    # The consumer group shares the stream: each message once, at one of the receivers.
    assert g["sender"]["sent"] == 600 and g["receiver"]["received"] == 600
    assert g["subscriber"]["received"] == 600 and g["pattern"]["received"] == 300
    assert g["ssub"]["received"] == 600
    assert g["requestor"]["received"] == 200 and g["responder"]["sent"] == 200
    for name, group in g.items():
        assert group["errors"] == 0 and group["lost"] == 0 and group["duplicated"] == 0, name
    # Every message was acknowledged: nothing left pending in the group.
    assert server.xpending(q, "harness")["pending"] == 0
    # A Requestor's reply stream goes with it.
    assert not server.keys("harness.reply.*")


def test_a_subscriber_disconnected_for_falling_behind_is_reported_with_its_loss(harness,
                                                                               server):
    t = unique("rslow")
    before = server.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
    classes = dict(zip(before.split()[::4], [before.split()[i:i + 4]
                                             for i in range(0, len(before.split()), 4)],
                       strict=True))
    # A small output buffer for pub/sub clients: a subscriber 64 kB behind is disconnected.
    server.config_set("client-output-buffer-limit", "pubsub 64kb 32kb 1")
    try:
        done = harness("run", "-m", "redis.Publisher", "-d", t, "--processes", "2", "-rl", "3",
                       "-ss", "1", "-g", f"-m redis.Subscriber -d {t}")
    finally:
        server.config_set("client-output-buffer-limit", " ".join(classes["pubsub"]))
    assert done.code == 0, done.stderr
    sent = done.summary["groups"]["publisher"]["sent"]
    subscriber = done.summary["groups"]["subscriber"]
    assert subscriber["reconnects"] >= 1
    assert "disconnected error: the server closed the subscription" in done.stderr
    assert subscriber["lost"] > 0
    assert subscriber["lost"] == sent - subscriber["received"]
    (delivery,) = done.summary["delivery"]
    assert delivery["missing"] == subscriber["lost"]


def test_a_killed_consumers_pending_messages_are_claimed_and_counted(server, tmp_path):
    q = unique("rclaim")
    server.xgroup_create(q, "harness", id="$", mkstream=True)
    # A second consumer of the group in a process of its own dies holding messages.
    summary, out = beside_a_killed_consumer(
        tmp_path, ["-m", "redis.Receiver", "-d", q, "--prefetch", "200"],
        ["-m", "redis.Sender", "-d", q, "-rt", "3000", "-rl", "6", "-ss", "1", "--drain", "8",
         "-g", f"-m redis.Receiver -d {q} --prefetch 200 --claim-idle 1"])
    sender, receiver = summary["groups"]["sender"], summary["groups"]["receiver"]
    assert receiver["redelivered"] > 0, "the killed consumer held nothing"
    assert f"receiver: {receiver['redelivered']} messages redelivered" in out
    assert receiver["duplicated"] == 0 and receiver["errors"] == 0
    # Nothing is left pending: what the dead consumer held was claimed and acknowledged.
    assert server.xpending(q, "harness")["pending"] == 0
    # What the receiver missed is exactly what the victim took and acknowledged before it died.
    (delivery,) = summary["delivery"]
    assert receiver["received"] + delivery["missing"] == sender["sent"]


def message(seq: int) -> Message:
    return Message(b"x" * 10, "run:p", seq, 0, 0)


def test_transactions_make_nothing_visible_before_the_commit(server):
    q = unique("rtx")
    transport = RedisTransport(settings_for("redis.Sender", transacted=True, maxlen=0))
    connect(transport)
    try:
        transport.begin()
        for seq in range(5):
            transport.send(Destination("queue", q), message(seq))
        transport.flush()  # a producer about to sleep: the transaction stays open
        assert server.xlen(q) == 0
        transport.commit()
        assert server.xlen(q) == 5
    finally:
        transport.close()


def test_a_command_the_server_refuses_in_a_pipeline_is_that_sends_failure(server):
    """Each answer of a pipeline is looked at: the sends the server refused, and only those,
    become failed sends with its reason."""
    q, other = unique("rrefused"), unique("rstring")
    server.set(other, "no stream")  # XADD to it answers WRONGTYPE
    transport = RedisTransport(settings_for("redis.Sender", maxlen=0))
    connect(transport)
    good, bad = Destination("queue", q), Destination("queue", other)
    try:
        for seq in range(3):
            transport.send(good, message(seq))
        transport.flush()
        assert transport.feedback.failed == []
        for seq, destination in enumerate((good, bad, good, bad, good), start=3):
            transport.send(destination, message(seq))
        transport.flush()
        failed = transport.feedback.failed
        assert [seq for seq, _, _ in failed] == [4, 6]
        assert all(kind == "send" and "WRONGTYPE" in reason for _, kind, reason in failed)
        assert server.xlen(q) == 6
    finally:
        transport.close()


def test_maxlen_trims_the_stream(harness, server):
    q = unique("rtrim")
    done = harness("run", "-m", "redis.Sender", "-d", q, "-mg", "5000", "--maxlen", "100")
    assert done.code == 0, done.stderr
    assert done.summary["groups"]["sender"]["sent"] == 5000
    # MAXLEN ~ trims whole nodes of the stream: about 100 entries, never all 5,000.
    assert 100 <= server.xlen(q) < 1000


@pytest.mark.parametrize(("args", "message"), [
    (["-m", "redis.Sender", "-d", "q", "-pp"], "-pp: Redis persists by its server"),
    (["-m", "redis.Subscriber", "-d", "q", "--selector", "a = 1"], "--selector: Redis has no"),
    (["-m", "redis.Receiver", "-d", "q", "-tx"], "-tx: Redis transactions"),
    (["-m", "redis.Subscriber", "-d", "q", "--durable-name", "d"],
     "--durable-name: pub/sub keeps nothing"),
    (["-m", "redis.Publisher", "-d", "q", "--maxlen", "10"], "--maxlen: trims streams"),
    (["-m", "redis.Sender", "-d", "q", "--property", "a=1"],
     "--property: transport redis does not support properties"),
])
def test_what_redis_cannot_do_is_refused_before_the_run(harness, args, message):
    done = harness("run", *args, "-rl", "1")
    assert done.code == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("role", "words"), [
    ("Sender", "{q} holds a string, not a stream"),
    ("Requestor", "{q} holds a string, not a stream"),
    ("Receiver", "subscribe to {q}: WRONGTYPE"),
])
def test_a_key_that_is_no_stream_fails_the_start(harness, server, role, words):
    """XADD and XREADGROUP would answer WRONGTYPE to every call: one line and exit 1."""
    q = unique("rstring")
    server.set(q, "not a stream")
    args = ["-rt", "100"] if role != "Receiver" else []
    done = harness("run", "-m", f"redis.{role}", "-d", q, "-rl", "2", *args)
    assert done.code == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"redis.{role} ({role.lower()}): cannot start: {words.format(q=q)}" in lines[0]


def test_a_read_the_server_refuses_each_time_does_not_spin(harness, server):
    """The stream turns into a string mid-run: every read fails at once. The receiver
    pauses after each, as a producer does after a failed send, rather than spin a core."""
    q = unique("rspoiled")

    def spoil() -> None:
        deadline = time.monotonic() + 30
        while not server.exists(q) and time.monotonic() < deadline:
            time.sleep(0.05)  # the receiver made its group, so the run has started
        time.sleep(0.5)
        with server.pipeline(transaction=True) as pipe:
            pipe.delete(q).set(q, "not a stream").execute()

    spoiler = threading.Thread(target=spoil)
    spoiler.start()
    done = harness("run", "-m", "redis.Receiver", "-d", q, "-rl", "3")
    spoiler.join()
    assert done.code == 0, done.stderr
    receiver = done.summary["groups"]["receiver"]
    # The first failure is WRONGTYPE, or UNBLOCKED when the delete caught a read blocked
    # on the stream; either way the line names the stream the read failed on.
    assert f"receive error: read {q}" in done.stderr, done.stderr
    # At most one an ERROR_PAUSE_S (10 ms): under 300 for the 3 s run (its clock starts
    # after the group is made, so a little more in all); spinning made thousands a second.
    assert 0 < receiver["errors"] <= 400, receiver["errors"]


def test_redis_acl_users_are_admitted_where_they_may_and_refused_in_words_elsewhere(
        harness, brokers, tmp_path):
    """A Redis of its own whose one user may use keys and channels beginning bench: its
    password from the environment gets it in and its messages through; a publish to a
    channel it may not use is refused message by message (kept by no one, counted once as
    refused and as an error); a stream it may not create ends the start in one line; a
    wrong password too."""
    secret = env()["MQTT_SECRET"]
    server = SecuredRedis(tmp_path / "redis", f"user bench on >{secret} ~bench* &bench* "
                          "+@all\n")
    server.start()
    login = ["--port", str(server.ports["redis"]), "--user", "bench", "--password-env",
             "MQTT_SECRET"]

    run = login_runs(harness, tmp_path, login, secret, timeout=60)

    try:
        _, allowed = run("-m", "redis.Sender", "-d", "bench.q", "-rt", "50", "--processes",
                         "2", "-g",
                         f"-m redis.Receiver -d bench.q {' '.join(login)}")
        _, denied = run("-m", "redis.Publisher", "-d", "other.t", "-rt", "50")
        stream, _ = run("-m", "redis.Sender", "-d", "other.q", "-rt", "50")
        wrong, _ = run("-m", "redis.Publisher", "-d", "bench.t", login=[
            "--port", str(server.ports["redis"]), "--user", "bench", "--password", "wrong"])
    finally:
        server.stop()
    assert allowed is not None and denied is not None
    delivered = allowed["delivery"][0]
    assert delivered["expected"] == delivered["received"] >= 100
    refused = denied["groups"]["publisher"]
    assert refused["sent"] + refused["unsent"] >= 100  # due: sent, or late at the stop
    assert refused["sent"] > 0 and refused["refused"] == refused["errors"] == \
        refused["sent"]
    assert denied["throughput"]["received_by_broker"] == 0
    assert stream.code == 1 and "other.q: this user has no permissions to access one of " \
        "the keys" in stream.stderr
    assert wrong.code == 1 and "invalid username-password pair" in wrong.stderr


def test_a_password_rotated_in_its_file_is_read_at_the_next_connection(brokers, tmp_path):
    """--password-file is read again at each connection the harness makes: the user's
    password changed at the server and in the file mid-run, and every connection killed,
    the sender connects again with the new one and sends to the end of the run. The
    secrets are in nothing the run printed or wrote."""
    import subprocess

    server = SecuredRedis(tmp_path / "redis", "user bench on >rotated-first ~bench* &bench* "
                          "+@all\n")
    server.start()
    secret = tmp_path / "secret"
    secret.write_text("rotated-first\n")
    port = server.ports["redis"]
    out = tmp_path / "runs"
    proc = subprocess.Popen(harness_command(
        "run", "-m", "redis.Sender", "-d", "bench.q", "-rt", "50", "-rl", "8", "-ss", "1",
        "--port", str(port), "--user", "bench", "--password-file", str(secret), "--no-ui",
        "-o", str(out)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env(), cwd=tmp_path)
    try:
        time.sleep(3)
        admin = redis.Redis(host=server.host, port=port, username="bench",
                            password="rotated-first")
        secret.write_text("rotated-second\n")
        admin.execute_command("ACL", "SETUSER", "bench", "resetpass", ">rotated-second")
        killed = admin.execute_command("CLIENT", "KILL", "USER", "bench")
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        server.stop()
    assert killed >= 1, killed  # the sender's connection (CLIENT KILL skips its own)
    assert proc.returncode == 0, stderr
    assert "WRONGPASS" not in stderr and "invalid username-password" not in stderr, stderr
    (run_dir,) = out.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    # Killed and sending after it: every connection made since logged in with the new
    # password (the old one is refused since the ACL changed).
    assert summary["groups"]["sender"]["sent"] >= 350, summary["groups"]["sender"]
    rows = [r for r in read_jsonl(run_dir / "intervals.jsonl")
            if r["type"] == "counters" and r["group"] == "sender"]
    assert sum(r["sent"] for r in rows if r["interval"] >= 5) >= 100, rows
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert b"rotated-" not in path.read_bytes(), path
    assert "rotated-" not in stdout + stderr
