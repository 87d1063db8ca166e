"""Every option a transport accepts changes what goes on the wire, or how the harness drives
the client: each run here goes through a recording proxy to the shared brokers, once without
the option and once with it, and the client's bytes must show the option only in the second.
Options whose effect is on the harness's side (no byte differs) are named with the test that
fails if they stop working. An option a transport accepts with neither is a failure here: it
would be an option silently ignored."""

from __future__ import annotations

import contextlib
import itertools
import re
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pika.frame
import pika.spec
from harness.modules import TRANSPORTS, transport_class
from harness.modules.interface.roles import ROLES

from harness.plan.options import table
from tests.conftest import ROOT, env, harness_command
from tests.cutter import Cutter
from tests.servers import Tansu
from tests.test_options import PROBES, accepted, playing

SHARED = {"stomp": 61613, "mqtt": 1883, "amqp": 5672, "nats": 4222, "redis": 6379, "http": 8090}
BASE = {"stomp": "--flavour activemq", "mqtt": "--flavour mosquitto",
        "amqp10": "--flavour rabbitmq"}
Streams = list[bytes]  # what the client sent, one entry per connection
Evidence = bytes | Callable[[Streams], bool]


def amqp_frames(stream: bytes) -> list[Any]:
    """AMQP 0-9-1 frames as pika itself decodes them."""
    frames, at = [], 0
    while at < len(stream):
        used, frame = pika.frame.decode_frame(stream[at:])
        if not used:
            break
        at += used
        frames.append(frame)
    return frames


def amqp_method(kind: type, test: Callable[[Any], bool] = lambda m: True) -> Evidence:
    def evidence(streams: Streams) -> bool:
        return any(isinstance(getattr(f, "method", None), kind) and test(f.method)
                   for s in streams for f in amqp_frames(s))
    return evidence


def amqp_header(test: Callable[[Any], bool]) -> Evidence:
    def evidence(streams: Streams) -> bool:
        return any(isinstance(f, pika.frame.Header) and test(f.properties)
                   for s in streams for f in amqp_frames(s))
    return evidence


def acks_apart(every: int) -> Evidence:
    """Most of a consumer's acknowledgements each cover `every` deliveries (multiple)."""
    def evidence(streams: Streams) -> bool:
        tags = [f.method.delivery_tag for s in streams for f in amqp_frames(s)
                if isinstance(getattr(f, "method", None), pika.spec.Basic.Ack)]
        gaps = [b - a for a, b in itertools.pairwise(tags)]
        return len(gaps) > 2 and sum(gap == every for gap in gaps) > len(gaps) / 2
    return evidence


def mqtt_packets(stream: bytes) -> list[tuple[int, bytes]]:
    """(first byte, rest of the packet) of each MQTT control packet."""
    packets, at = [], 0
    while at + 1 < len(stream):
        first, length, shift, at = stream[at], 0, 0, at + 1
        while at < len(stream):
            byte = stream[at]
            at += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if at + length > len(stream):
            break  # the rest is still on its way
        packets.append((first, stream[at:at + length]))
        at += length
    return packets


def mqtt_connect_flags(test: Callable[[int], bool]) -> Evidence:
    def evidence(streams: Streams) -> bool:
        return any(first == 0x10 and test(body[7])  # after the name "MQTT" and the level
                   for s in streams for first, body in mqtt_packets(s))
    return evidence


def mqtt_publish(test: Callable[[int], bool]) -> Evidence:
    def evidence(streams: Streams) -> bool:
        return any(first >> 4 == 3 and test(first) for s in streams
                   for first, _ in mqtt_packets(s))
    return evidence


def kafka_frames(stream: bytes) -> list[bytes]:
    """Each Kafka request or response on a connection: its size (int32), then itself."""
    frames, at = [], 0
    while at + 4 <= len(stream):
        size = int.from_bytes(stream[at:at + 4], "big")
        frame = stream[at + 4:at + 4 + size]
        if size < 4 or len(frame) < size:
            break  # the rest is still on its way
        frames.append(frame)
        at += 4 + size
    return frames


def kafka_requests(stream: bytes) -> list[tuple[int, bytes]]:
    """(API key, the rest of the request) of each Kafka request a client sent: its API key
    (int16), then its version, correlation id, client id and body."""
    return [(int.from_bytes(f[:2], "big"), f[2:]) for f in kafka_frames(stream)]


def kafka(api: int, pattern: bytes = b"", least: int = 1, most: int | None = None) -> Evidence:
    """At least `least` (and, where given, at most `most`) requests of one API whose bytes
    match pattern: 0 Produce, 1 Fetch, 2 ListOffsets, 8 OffsetCommit, 11 JoinGroup,
    17 SaslHandshake, 19 CreateTopics, 22 InitProducerId, 26 EndTxn."""
    def evidence(streams: Streams) -> bool:
        count = sum(1 for s in streams for key, rest in kafka_requests(s)
                    if key == api and re.search(pattern, rest, re.DOTALL))
        return count >= least and (most is None or count <= most)
    return evidence


# librdkafka's Fetch: max wait (ms), min bytes, max bytes (its default, 50 MiB), isolation
FETCH = b"\x00\x00\x01\xf4\x00\x00\x00\x01\x03\x20\x00\x00"
KAFKA_FED = "-m kafka.Sender -rt 20"

TEXT = rb"[a-zA-Z0-9 ]{256}"  # a --type text body: printable where bytes are random
TLS = rb"\A\x16\x03"  # a TLS handshake record first, where the protocol would speak


@dataclass(frozen=True)
class Wire:
    """A run of `module` with and without `option`: `evidence` (a pattern over what one
    connection sent, DEST standing for the destination, or a test of every connection's
    bytes) must hold only with it. `peer` is a second group on the same destination."""

    module: str
    option: str
    evidence: Evidence
    base: str = ""
    peer: str = ""

    @property
    def transport(self) -> str:
        return self.module.split(".")[0]

    @property
    def key(self) -> str:
        flag = self.option.split()[0]
        for option in table().values():
            if flag in (f"--{option.key}", f"--no-{option.key}", option.short):
                return option.key
        raise AssertionError(f"no option {flag}")

    @property
    def setup(self) -> tuple[str, str, str]:
        return self.module, self.base, self.peer


RECEIVER_FED = "-m amqp.Sender -rt 50"
CASES = [
    # STOMP on ActiveMQ
    Wire("stomp.Sender", "--type text", TEXT),
    Wire("stomp.Sender", "--property probe=4711", rb"\nprobe:4711\n"),
    Wire("stomp.Sender", "-co corr4711", rb"\ncorrelation-id:corr4711"),
    Wire("stomp.Sender", "-pp", rb"\npersistent:true\n"),
    Wire("stomp.Sender", "--ttl 4711", rb"\nexpires:1\d{12}\n"),
    Wire("stomp.Sender", "--priority 7", rb"\npriority:7\n"),
    Wire("stomp.Sender", "-tx", rb"(\A|\x00)BEGIN\n"),
    Wire("stomp.Sender", "--client-id client4711", rb"\nclient-id:client4711"),
    Wire("stomp.Sender", "--user user4711 --password pw", rb"\nlogin:user4711\n"),
    Wire("stomp.Sender", "--tls", TLS),
    Wire("stomp.Sender", "--vhost vhost4711", rb"\nhost:vhost4711\n"),
    Wire("stomp.Sender", "--heartbeat 4.711", rb"\nheart-beat:4711,4711\n"),
    Wire("stomp.Receiver", "--selector probe=4711", rb"\nselector:probe=4711\n"),
    Wire("stomp.Subscriber", "--durable-name dur4711", rb"dur4711"),
    Wire("stomp.Receiver", "--ack client", rb"\nack:client\n"),
    Wire("stomp.Receiver", "--prefetch 47", rb"\nactivemq.prefetchSize:47\n"),
    Wire("stomp.Requestor", "--reply-queue rq4711", rb"rq4711", "--reply-timeout 1"),
    # MQTT on Mosquitto
    # --client-config: MQTT 5's Maximum Packet Size property (39), four bytes
    Wire("mqtt.Publisher", "--client-config properties.MaximumPacketSize=4711",
         rb"\x27\x00\x00\x12\x67", "--protocol 5"),
    Wire("mqtt.Publisher", "--client-id client4711", rb"client4711"),
    Wire("mqtt.Publisher", "--user user4711 --password pw", rb"user4711"),
    Wire("mqtt.Publisher", "--tls", TLS),
    Wire("mqtt.Publisher", "--heartbeat 4711", rb"MQTT[\x04\x05].\x12\x67"),
    Wire("mqtt.Publisher", "--qos 1", mqtt_publish(lambda first: (first >> 1) & 3 == 1)),
    # MQTT 5's message expiry interval: property 2, four bytes of seconds
    Wire("mqtt.Publisher", "--ttl 4711", rb"\x02\x00\x00\x12\x67", "--protocol 5"),
    Wire("mqtt.Publisher", "--retain", mqtt_publish(lambda first: first & 1 == 1)),
    Wire("mqtt.Subscriber", "--no-clean", mqtt_connect_flags(lambda flags: not flags & 2),
         "--client-id sub4711"),
    Wire("mqtt.Subscriber", "--session-expiry 4711", rb"\x11\x00\x00\x12\x67",
         "--protocol 5 --no-clean --client-id sub4712"),
    Wire("mqtt.Publisher", "--type text", TEXT),
    Wire("mqtt.Publisher", "-co corr4711", rb"corr4711"),
    # AMQP 0-9-1 on RabbitMQ
    Wire("amqp.Sender", "--client-config frame_max=47110",
         amqp_method(pika.spec.Connection.TuneOk, lambda m: m.frame_max == 47110)),
    Wire("amqp.Sender", "--type text", TEXT),
    Wire("amqp.Sender", "--property probe=4711", rb"\x05probe"),
    Wire("amqp.Sender", "-co corr4711", amqp_header(lambda p: p.correlation_id == "corr47110")),
    Wire("amqp.Sender", "-pp", amqp_header(lambda p: p.delivery_mode == 2)),
    Wire("amqp.Sender", "--ttl 4.711", amqp_header(lambda p: p.expiration == "4711")),
    Wire("amqp.Sender", "--priority 7", amqp_header(lambda p: p.priority == 7)),
    Wire("amqp.Sender", "-tx", amqp_method(pika.spec.Tx.Select)),
    Wire("amqp.Sender", "--client-id client4711", rb"client4711"),
    Wire("amqp.Sender", "--user user4711 --password pw", rb"\x00user4711\x00"),
    Wire("amqp.Sender", "--tls", TLS),
    Wire("amqp.Sender", "--vhost vhost4711",
         amqp_method(pika.spec.Connection.Open, lambda m: m.virtual_host == "vhost4711")),
    Wire("amqp.Sender", "--heartbeat 4.711",
         amqp_method(pika.spec.Connection.TuneOk, lambda m: m.heartbeat == 5)),
    Wire("amqp.Sender", "--confirm 5", amqp_method(pika.spec.Confirm.Select)),
    Wire("amqp.Sender", "--mandatory",
         amqp_method(pika.spec.Basic.Publish, lambda m: m.mandatory)),
    Wire("amqp.Sender", "--exchange ex4711", rb"ex4711"),
    Wire("amqp.Publisher", "--exchange-type headers",
         amqp_method(pika.spec.Exchange.Declare, lambda m: m.type == "headers"),
         "--exchange ex4712"),
    Wire("amqp.Publisher", "--routing-key rk4711",
         amqp_method(pika.spec.Basic.Publish, lambda m: m.routing_key == "rk4711"),
         "--exchange ex4713"),
    Wire("amqp.Subscriber", "--bind-arg probe=4711",
         amqp_method(pika.spec.Queue.Bind, lambda m: str(m.arguments.get("probe")) == "4711"),
         "--exchange ex4714 --exchange-type headers"),
    Wire("amqp.Receiver", "--queue-type quorum",
         amqp_method(pika.spec.Queue.Declare,
                     lambda m: (m.arguments or {}).get("x-queue-type") == "quorum")),
    Wire("amqp.Receiver", "--stream-offset first",
         amqp_method(pika.spec.Basic.Consume,
                     lambda m: (m.arguments or {}).get("x-stream-offset") == "first"),
         "--queue-type stream --ack client --prefetch 10"),
    Wire("amqp.Receiver", "--no-durable",
         # not the passive declares that read the queue's depth: they declare nothing
         amqp_method(pika.spec.Queue.Declare, lambda m: not m.durable and not m.passive)),
    Wire("amqp.Receiver", "--exclusive",
         amqp_method(pika.spec.Queue.Declare, lambda m: m.exclusive)),
    Wire("amqp.Receiver", "--auto-delete",
         amqp_method(pika.spec.Queue.Declare, lambda m: m.auto_delete)),
    Wire("amqp.Receiver", "--max-length 4711",
         amqp_method(pika.spec.Queue.Declare,
                     lambda m: (m.arguments or {}).get("x-max-length") == 4711)),
    Wire("amqp.Receiver", "--queue-arg x-probe=4711",
         amqp_method(pika.spec.Queue.Declare,
                     lambda m: (m.arguments or {}).get("x-probe") is not None)),
    Wire("amqp.Receiver", "--ack client",
         amqp_method(pika.spec.Basic.Consume, lambda m: not m.no_ack)),
    Wire("amqp.Receiver", "--prefetch 47",
         amqp_method(pika.spec.Basic.Qos, lambda m: m.prefetch_count == 47), "--ack client"),
    Wire("amqp.Receiver", "--ack-every 10",
         acks_apart(10), "--ack client",
         RECEIVER_FED),
    Wire("amqp.Subscriber", "--durable-name dur4711", rb"dur4711"),
    Wire("amqp.Requestor", "--reply-queue rq4711", rb"rq4711", "--reply-timeout 1"),
    # AMQP 1.0 on RabbitMQ
    Wire("amqp10.Sender", "--type text", TEXT),
    Wire("amqp10.Sender", "--property probe=4711", rb"probe"),
    Wire("amqp10.Sender", "-co corr4711", rb"corr4711"),
    # the header section (descriptor 0x70) with durable true first
    Wire("amqp10.Sender", "-pp", rb"\x00\x53\x70[\xc0\xd0].{1,8}?\x41"),
    # The header's fields: durable, priority (a ubyte), ttl (milliseconds, a uint)
    Wire("amqp10.Sender", "--priority 7", rb"\x00\x53\x70[\xc0\xd0].{1,8}?\x50\x07"),
    Wire("amqp10.Sender", "--ttl 4.711", rb"\x00\x53\x70[\xc0\xd0].{1,12}?\x70\x00\x00\x12\x67"),
    Wire("amqp10.Sender", "--client-id client4711", rb"client4711"),
    Wire("amqp10.Sender", "--user user4711 --password pw", rb"\x00user4711\x00"),
    Wire("amqp10.Sender", "--tls", TLS),
    # the attach of a sender: snd-settle-mode settled (1)
    Wire("amqp10.Sender", "--settle at-most-once", rb"\x00\x53\x12.{4,80}?\x50\x01"),
    # Proton advertises half its idle timeout (twice --heartbeat): 4711 ms, a uint in Open.
    Wire("amqp10.Sender", "--heartbeat 4.711", rb"\x00\x53\x10.{4,200}?\x70\x00\x00\x12\x67"),
    Wire("amqp10.Receiver", "--prefetch 47", rb"\x00\x53\x13.{4,80}?\x52\x2f"),
    # The target (descriptor 0x29) of a sender's attach: its address, then durable none (a
    # uint 0, or nothing more); durable configuration (a smalluint 1) without the option
    Wire("amqp10.Sender", "--no-durable",
         rb"\x00\x53\x29[\xc0\xd0].{1,8}?/queue/DEST[\x40\x43]"),
    Wire("amqp10.Requestor", "--reply-queue rq4711", rb"rq4711", "--reply-timeout 1"),
    # NATS and JetStream
    Wire("nats.Publisher", "--client-config pedantic=true", rb'"pedantic": ?true'),
    # nats-py's PINGs every --heartbeat: a 0.2 s one sends many within a run.
    Wire("nats.Publisher", "--heartbeat 0.2", rb"(?s)(PING\r\n.*){6}"),
    Wire("nats.Publisher", "--type text", TEXT),
    Wire("nats.Publisher", "--property probe=4711", rb"\r\nprobe: 4711\r\n"),
    Wire("nats.Publisher", "-co corr4711", rb"corr4711"),
    Wire("nats.Publisher", "--client-id client4711", rb'"name": ?"client4711'),
    Wire("nats.Publisher", "--user user4711 --password pw", rb'"user": ?"user4711"'),
    # nats-py speaks in clear to a server that does not require TLS: --tls refuses it first
    Wire("nats.Publisher", "--tls", lambda streams: not any(b"CONNECT" in s for s in streams)),
    Wire("nats.Sender", "--jetstream", rb"\$JS\.API\.STREAM"),
    Wire("nats.Sender", "--stream st4711", rb"st4711", "--jetstream"),
    Wire("nats.Sender", "--storage memory", rb'"storage": ?"memory"', "--jetstream"),
    Wire("nats.Sender", "--retention workqueue", rb'"retention": ?"workqueue"', "--jetstream"),
    Wire("nats.Receiver", "--prefetch 47", rb'"max_ack_pending": ?47\b',
         "--jetstream --ack client"),
    Wire("nats.Receiver", "--pull-batch 47", rb'"batch": ?47\b', "--jetstream --ack client"),
    Wire("nats.Receiver", "--ack-wait 4.7", rb'"ack_wait": ?4700000000\b',
         "--jetstream --ack client"),
    # Redis
    Wire("redis.Publisher", "--client-config lib_name=lib4711", rb"SETINFO.{1,40}lib4711"),
    Wire("redis.Publisher", "--type text", TEXT),
    Wire("redis.Publisher", "-co corr4711", rb"corr4711"),
    Wire("redis.Sender", "-tx", rb"\*1\r\n\$5\r\nMULTI\r\n"),
    Wire("redis.Publisher", "--client-id client4711", rb"SETNAME\r\n\$\d+\r\nclient4711"),
    Wire("redis.Publisher", "--user user4711 --password pw", rb"AUTH\r\n\$8\r\nuser4711"),
    Wire("redis.Publisher", "--tls", TLS),
    # An idle subscription PINGs after each --heartbeat: a 0.2 s one many times in a run.
    Wire("redis.Subscriber", "--heartbeat 0.2", rb"(?s)(PING.{1,40}?redis-py-health-check.*){4}"),
    Wire("redis.Publisher", "--database 3", rb"SELECT\r\n\$1\r\n3\r\n"),
    Wire("redis.Publisher", "--streams", rb"XADD"),
    Wire("redis.Sender", "--maxlen 4711", rb"MAXLEN\r\n(\$1\r\n~\r\n)?\$4\r\n4711", "--streams"),
    Wire("redis.Receiver", "--prefetch 47", rb"COUNT\r\n\$2\r\n47\r\n", "--streams"),
    # HTTP on nginx
    Wire("http.Requestor", "--type text", TEXT),
    Wire("http.Requestor", "--property probe=4711", rb"\r\n[Pp]robe: 4711\r\n"),
    Wire("http.Requestor", "--user user4711 --password pw",
         rb"\r\n[Aa]uthorization: Basic dXNlcjQ3MTE6cHc="),
    Wire("http.Requestor", "--tls", TLS),
    Wire("http.Requestor", "--method PUT", rb"(\A|\n)PUT /"),
    # Kafka on a private Tansu (upstream()); Produce v10, Fetch v16, CreateTopics v4 as
    # librdkafka 2.16 speaks them to Tansu 0.6.0
    Wire("kafka.Sender", "--type text", TEXT),
    Wire("kafka.Sender", "-co corr4711", rb"corr4711"),
    Wire("kafka.Sender", "-tx", kafka(26)),  # EndTxn
    Wire("kafka.Sender", "--client-id client4711", kafka(0, rb"client4711")),
    # A produce request's timeout is two heartbeats: acks -1, then 9422 ms.
    Wire("kafka.Sender", "--heartbeat 4.711", kafka(0, rb"\xff\xff\x00\x00\x24\xce")),
    Wire("kafka.Sender", "--user user4711 --password pw", kafka(17, rb"PLAIN")),
    Wire("kafka.Sender", "--tls", TLS),
    # the transactional id (null), acks, the request's timeout (30 s)
    # acks 1, then the request timeout: two heartbeats (3 s by default), 6000 ms.
    Wire("kafka.Sender", "--acks 1", kafka(0, rb"\x00\x00\x01\x00\x00\x17\x70")),
    Wire("kafka.Sender", "--idempotence", kafka(22)),  # InitProducerId
    Wire("kafka.Sender", "--linger-ms 400", kafka(0, most=20)),  # 40 sends, batched
    Wire("kafka.Sender", "--batch-size 100", kafka(0, least=30), "--linger-ms 400"),
    # (librdkafka sends a batch that compression would not shrink as it is: text shrinks)
    Wire("kafka.Sender", "--compression gzip", kafka(0, rb"\x1f\x8b\x08"), "--type text"),
    Wire("kafka.Sender", "--keys producer", kafka(0, rb"-sender-0\.0")),
    # CreateTopics: partitions (int32), replication (int16)
    Wire("kafka.Sender", "--partitions 7", kafka(19, rb"\x00\x00\x00\x07\x00\x01")),
    Wire("kafka.Sender", "--replication 3", kafka(19, rb"\x00\x00\x00\x01\x00\x03")),
    # CreateTopics: the config's name and value
    Wire("kafka.Sender", "--topic-config retention.ms=4711000",
         kafka(19, rb"retention\.ms.{1,4}4711000")),
    Wire("kafka.Receiver", "--consumer-group grp4711", kafka(11, rb"grp4711"),
         peer=KAFKA_FED),
    # JoinGroup: the session timeout (6 s at most), the rebalance timeout (47 s)
    Wire("kafka.Receiver", "--rebalance-timeout 47",
         kafka(11, rb"\x00\x00\x17\x70\x00\x00\xb7\x98"), peer=KAFKA_FED),
    # ListOffsets from the end (-1), not the start (-2), of a group with no offset
    Wire("kafka.Receiver", "--offset-reset latest", kafka(2, rb"\xff{8}"), peer=KAFKA_FED),
    Wire("kafka.Receiver", "--commit sync", kafka(8, least=6), "--commit-every 5",
         peer=KAFKA_FED),
    Wire("kafka.Receiver", "--commit-every 5", kafka(8, least=6), "--commit sync",
         peer=KAFKA_FED),
    Wire("kafka.Receiver", "--fetch-wait-ms 4711",
         kafka(1, rb"\x00\x00\x12\x67" + FETCH[4:]), peer=KAFKA_FED),
    Wire("kafka.Receiver", "--fetch-min-bytes 4711",
         kafka(1, FETCH[:4] + rb"\x00\x00\x12\x67"), peer=KAFKA_FED),
    # each partition's fetch: offset, last epoch (-1), log start (-1), its most bytes
    Wire("kafka.Receiver", "--fetch-max-bytes 4711", kafka(1, rb"\xff{12}\x00\x00\x12\x67"),
         peer=KAFKA_FED),
    Wire("kafka.Receiver", "--isolation read_uncommitted", kafka(1, FETCH + b"\x00"),
         peer=KAFKA_FED),
]
# Options whose effect no byte on the wire shows: the test that fails if each stops working.
ON_THE_HARNESS_SIDE = {
    "crc": "test_faults.py::test_injected_faults_are_counted_exactly",
    "reply-timeout": "test_truth.py::"
        "test_a_requestor_that_gets_no_answer_records_its_timeouts_in_latency",
    "requeue": "test_amqp.py::test_a_refused_reply_gives_its_request_back",
    "pending-limit": "test_nats.py::"
        "test_core_nats_drops_for_a_slow_consumer_and_the_loss_is_counted_exactly",
    "claim-idle": "test_redis.py::"
        "test_a_killed_consumers_pending_messages_are_claimed_and_counted",
    "inflight": "test_wire.py::test_a_window_of_unacknowledged_sends_is_held_as_given",
    "confirm": "test_wire.py::test_a_window_of_unacknowledged_sends_is_held_as_given",
    "max-in-flight": "test_wire.py::test_a_window_of_unacknowledged_sends_is_held_as_given",
    "send-timeout": "test_kafka.py::test_a_send_no_broker_answers_is_in_doubt_after_send_timeout",
    # each to a nats-server of the test's own that admits no other way in
    **dict.fromkeys(("token", "nkey", "creds"), "test_nats.py::"
                    "test_a_server_that_admits_a_token_an_nkey_or_a_credentials_file_is_reached"),
    # runs through RabbitMQ's ports that speak WebSockets only (without the option the same
    # flags get no answer there: test_tcp_on_a_websocket_port_fails_in_one_line)
    "websocket": "test_websockets.py::test_every_message_crosses_websockets",
}
# Shown by a transport in a test of its own: the key a flag of the harness also sets
# (client.id) through a proxy of its own; a connection's source port, which no byte shows.
ELSEWHERE = {
    ("kafka", "client-config"): "test_kafka.py::"
        "test_client_properties_reach_the_client_on_the_wire_and_bad_ones_are_refused",
    ("stomp", "client-config"):
        "test_wire.py::test_a_client_setting_shows_in_the_connections_source_port",
    # --cert-login needs a broker that takes certificates as logins, over TLS
    **dict.fromkeys((("amqp", "cert-login"), ("amqp10", "cert-login")),
                    "test_tls.py::test_a_client_certificate_logs_in_on_every_rabbitmq_protocol"),
}
# JetStream acknowledges every message either way: --ack auto on its arrival in the client,
# --ack client once the harness has measured it. No byte and no figure tells them apart
# while the receiver lives; they differ in what a receiver that dies leaves redelivered.
SAME_BYTES = {("nats", "ack")}
# Accepted only where no server here can show them: the loopback broker runs in the process.
NO_WIRE = {"loopback"}
# Seconds each run takes: a Kafka consumer group forms in about three, after its topic
# exists (its Sender, in a process beside it, makes it); a Kafka producer's first request
# shows its settings as soon as any other client's does.
RUN_LENGTH_S, GROUP_FORMS_S = 2, 8


def run_length(case: Wire) -> int:
    joins = case.transport == "kafka" and ROLES[case.module.split(".")[1]].consumes
    return GROUP_FORMS_S if joins else RUN_LENGTH_S


def destination(case: Wire) -> str:
    if case.transport == "http":
        return "/"
    return f"wire{uuid.uuid4().hex[:10]}"  # a JetStream stream's name takes no dots


@contextlib.contextmanager
def upstream(transport: str, out: Path) -> Iterator[Cutter]:
    """A recording proxy in front of the transport's shared broker; for Kafka, in front of a
    private Tansu that advertises the proxy's port (a Kafka client connects to the address
    the broker gives it, so the shared one's would lead around the proxy)."""
    if transport != "kafka":
        proxy = Cutter(("127.0.0.1", SHARED["amqp" if transport == "amqp10" else transport]),
                       record=True)
        try:
            yield proxy
        finally:
            proxy.close()
        return
    broker = Tansu(out / f"tansu-{uuid.uuid4().hex[:8]}")
    proxy = Cutter(("127.0.0.1", broker.ports["kafka"]), record=True)
    broker.advertised = proxy.port
    try:
        broker.start()
        yield proxy
    finally:
        proxy.close()
        broker.stop()


def record(case: Wire, with_option: bool, out: Path) -> tuple[Streams, str, str]:
    with upstream(case.transport, out) as proxy:
        return _record(case, with_option, out, proxy)


def _record(case: Wire, with_option: bool, out: Path, proxy: Cutter
            ) -> tuple[Streams, str, str]:
    dest = destination(case)
    at = f"-d {dest} --port {proxy.port} {BASE.get(case.transport, '')}"
    args = [*case.module.join(["-m ", ""]).split(), *at.split(), *case.base.split(),
            *(case.option.split() if with_option else [])]
    if ROLES[case.module.split(".")[1]].produces:
        args += ["-rt", "20"]
    if case.peer:
        args += ["-g", f"{case.peer} {at}"]
    seconds = str(run_length(case))
    proc = subprocess.run(harness_command("run", *args, "-rl", seconds, "-ss", "1", "--drain",
                                          "1", "-o", str(out / uuid.uuid4().hex[:8])),
                          capture_output=True, text=True, timeout=120, env=env(), cwd=out)
    proxy.close()  # every connection's bytes in the log
    assert proxy.log is not None
    streams: dict[int, bytes] = {}
    for number, upstream, data in proxy.log:
        if upstream:
            streams[number] = streams.get(number, b"") + data
    return list(streams.values()), dest, proc.stderr[-300:]


def shows(evidence: Evidence, streams: Streams, dest: str) -> bool:
    if callable(evidence):
        return evidence(streams)
    pattern = re.compile(evidence.replace(b"DEST", re.escape(dest.encode())), re.DOTALL)
    return any(pattern.search(s) for s in streams)


def test_every_accepted_option_shows_on_the_wire(tmp_path: Path, brokers: Any) -> None:
    setups = {case.setup: case for case in CASES}
    # Ten at a time: a case is a run of two seconds, most of it waiting (six kept two cores
    # half busy).
    with ThreadPoolExecutor(10) as pool:
        baselines = dict(zip(setups, pool.map(lambda c: record(c, False, tmp_path),
                                              setups.values()), strict=True))
        runs = list(pool.map(lambda c: record(c, True, tmp_path), CASES))
    wrong = []
    for case, (streams, dest, stderr) in zip(CASES, runs, strict=True):
        before, before_dest, _ = baselines[case.setup]
        if shows(case.evidence, before, before_dest):
            wrong.append(f"{case.module} {case.option}: shows without the option")
        if not shows(case.evidence, streams, dest):
            sent = b"".join(streams)[:400]
            wrong.append(f"{case.module} {case.option}: not on the wire; sent {sent!r}; "
                         f"{stderr}")
    assert not wrong, "\n".join(wrong)


def test_every_option_a_transport_accepts_is_on_the_wire_or_named_with_its_test() -> None:
    """The list above is the whole of what the transports accept: an option added to a
    transport (or a probe it starts accepting) without a case here fails."""
    covered = {(case.transport, case.key) for case in CASES}
    missing = []
    for name in TRANSPORTS:
        if name in NO_WIRE:
            continue
        takes = {option.key for option in transport_class(name).options}
        takes |= {key for key, value in PROBES.items()
                  if any(accepted(f"{name}.{role}", key, value) for role in playing(name))}
        takes.discard("password")  # sent with --user, checked there
        for key in sorted(takes - set(ON_THE_HARNESS_SIDE)):
            if (name, key) not in covered | SAME_BYTES | set(ELSEWHERE):
                missing.append(f"{name} --{key}")
    assert not missing, "accepted, never shown to change what is sent: " + ", ".join(missing)
    for where in {*ON_THE_HARNESS_SIDE.values(), *ELSEWHERE.values()}:
        file, test = where.split("::")
        assert f"def {test}(" in (ROOT / "tests" / file).read_text(), where


def test_a_client_setting_shows_in_the_connections_source_port(tmp_path: Path,
                                                               brokers: Any) -> None:
    """stomp.py's bind_host_port and paho's bind_port, given by --client-config, are the
    port each connection comes from, as the broker's side (a proxy in front of it) sees."""
    for module, key, base in (("stomp.Sender", "bind_host_port=127.0.0.1:{}",
                               "--flavour activemq"),
                              ("mqtt.Publisher", "bind_port={}", "--flavour mosquitto")):
        with socket.socket() as probe:  # a port free now, as the test's own
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        transport = module.split(".")[0]
        proxy = Cutter(("127.0.0.1", SHARED[transport]), record=True)
        try:
            done = subprocess.run(harness_command(
                "run", "-m", module, "-d", f"src{uuid.uuid4().hex[:8]}", *base.split(),
                "--port", str(proxy.port), "--client-config", key.format(port), "-rt", "20",
                "-rl", "1", "-o", str(tmp_path)), capture_output=True, text=True,
                timeout=60, env=env(), cwd=tmp_path)
        finally:
            proxy.close()
        assert done.returncode == 0, done.stderr
        assert proxy.peers == [("127.0.0.1", port)], (module, proxy.peers)


Count = Callable[[bytes], int]


def mqtt_count(kind: int) -> Count:
    return lambda stream: sum(first >> 4 == kind for first, _ in mqtt_packets(stream))


def pattern_count(pattern: bytes) -> Count:
    return lambda stream: len(re.findall(pattern, stream))


def outstanding(log: list[tuple[int, bool, bytes]], sends: Count, acks: Count) -> int:
    """The most sends (counted in what the client sent) ever unacknowledged (counted in
    what the server sent) on one connection, in the order the proxy read them:
    a client that waits for an acknowledgement cannot send past it before the proxy has
    passed the acknowledgement on."""
    most = 0
    for number in {n for n, _, _ in log}:
        sent = [b"", b""]  # what the server sent, what the client sent
        count = [0, 0]
        for n, upstream, data in log:
            if n != number:
                continue
            sent[upstream] += data
            count[upstream] = (sends if upstream else acks)(sent[upstream])
            most = max(most, count[1] - count[0])
    return most


def test_a_window_of_unacknowledged_sends_is_held_as_given(tmp_path: Path,
                                                           brokers: Any) -> None:
    # (module, flags, the window given, what a send and its acknowledgement look like)
    windows = [
        ("mqtt.Publisher", "--qos 1 --flavour mosquitto", "--inflight", 1883,
         mqtt_count(3), mqtt_count(4)),  # PUBLISH, PUBACK
        ("nats.Sender", "--jetstream", "--inflight", 4222,
         pattern_count(rb"(?:^|\r\n)H?PUB wire\w+ _INBOX"),
         # a publish's acknowledgement, not the answers to the stream's set-up
         pattern_count(rb'(?:^|\r\n)MSG _INBOX\S+ \d+ +\d+\r\n\{"stream"')),
    ]
    for module, flags, flag, port, sends, acks in windows:
        most = {}
        for window in (1, 8):
            proxy = Cutter(("127.0.0.1", port), record=True)
            try:
                done = subprocess.run(harness_command(
                    "run", "-m", module, "-d", f"wire{uuid.uuid4().hex[:10]}", *flags.split(),
                    "--port", str(proxy.port), flag, str(window), "-mg", "2000", "-ss", "1",
                    "-o", str(tmp_path / f"{module}{window}")),
                    capture_output=True, text=True, timeout=120, env=env(), cwd=tmp_path)
            finally:
                proxy.close()
            assert done.returncode == 0, done.stderr
            assert proxy.log is not None
            most[window] = outstanding(proxy.log, sends, acks)
        # Held to one; given eight, as fast as it can send, it has more than one out.
        assert most[1] == 1 and most[8] > 1, (module, most)
    # Kafka: Produce requests unanswered on a producer's connection, each answer known by
    # its correlation id; small batches sent at once, so that there are many to pipeline.
    most = {}
    for window in (1, 8):
        with upstream("kafka", tmp_path) as proxy:
            done = subprocess.run(harness_command(
                "run", "-m", "kafka.Sender", "-d", f"wire{uuid.uuid4().hex[:10]}", "--port",
                str(proxy.port), "--max-in-flight", str(window), "--linger-ms", "0",
                "--batch-size", "1000", "-mg", "2000", "-ss", "1",
                "-o", str(tmp_path / f"kafka{window}")),
                capture_output=True, text=True, timeout=120, env=env(), cwd=tmp_path)
            proxy.close()
        assert done.returncode == 0, done.stderr
        assert proxy.log is not None
        sent: dict[int, bytes] = {}
        for number, from_client, data in proxy.log:
            if from_client:
                sent[number] = sent.get(number, b"") + data
        # (only the producer's connection sends Produce requests)
        produced = {rest[2:6] for stream in sent.values()
                    for key, rest in kafka_requests(stream) if key == 0}
        most[window] = outstanding(
            proxy.log, lambda stream: sum(key == 0 for key, _ in kafka_requests(stream)),
            lambda stream, ids=produced: sum(f[:4] in ids for f in kafka_frames(stream)))
    assert most[1] == 1 and most[8] > 1, ("kafka.Sender", most)
    # AMQP 1.0 settles every send either way; --confirm times the settlements (the confirm
    # metric) and keeps that many unsettled, where without it each send waits for its own.
    for confirm in ("0", "20"):
        done = subprocess.run(harness_command(
            "run", "-m", "amqp10.Sender", "-d", f"wire{uuid.uuid4().hex[:10]}", "--flavour",
            "rabbitmq", "--confirm", confirm, "-mg", "200", "-ss", "1",
            "-o", str(tmp_path / f"amqp10-{confirm}")), capture_output=True, text=True,
            timeout=120, env=env(), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        timed = "settlements (dispositions) p50" in done.stdout
        assert timed == (confirm != "0"), done.stdout
