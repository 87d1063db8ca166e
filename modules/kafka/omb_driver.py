"""OpenMessaging Benchmark's Kafka driver files (driver-kafka/*.yaml), as they are: the Java
client's properties a flag of the harness sets become that flag, on the producer or the
consumer group; the rest go to librdkafka as they are, read from the file where they stand
(`--client-config @FILE#producerConfig`, so that a secret stays in the file); the few that
only the Java client has are left out, each said."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.modules.kit.client_config import section_properties

KEYS = ("name", "driverClass", "replicationFactor", "reset", "topicConfig", "commonConfig",
        "producerConfig", "consumerConfig")
SECTIONS = {"commonConfig": ("producer", "consumer"), "producerConfig": ("producer",),
            "consumerConfig": ("consumer",)}


def _seconds(ms: str) -> float:
    return float(ms) / 1000


def _boolean(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(f"{value!r} is not true or false")
    return value.lower() == "true"


# The Java client's properties a flag of the harness sets: (the flag's key, its value).
AS_FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "acks": ("acks", lambda v: "all" if v == "-1" else v),
    "linger.ms": ("linger-ms", float),
    "batch.size": ("batch-size", int),
    "enable.idempotence": ("idempotence", _boolean),
    "max.in.flight.requests.per.connection": ("max-in-flight", int),
    "compression.type": ("compression", str),
    "delivery.timeout.ms": ("send-timeout", _seconds),
    "auto.offset.reset": ("offset-reset", str),
    # OMB's consumer commits each poll's offsets asynchronously where auto-commit is off.
    "enable.auto.commit": ("commit", lambda v: "auto" if _boolean(v) else "async"),
    "isolation.level": ("isolation", str),
    "fetch.min.bytes": ("fetch-min-bytes", int),
    "fetch.max.wait.ms": ("fetch-wait-ms", int),
    "fetch.wait.max.ms": ("fetch-wait-ms", int),
    "max.partition.fetch.bytes": ("fetch-max-bytes", int),
    "max.poll.interval.ms": ("rebalance-timeout", _seconds),
}
# The Java client's settings librdkafka has no equivalent of: left out, each said.
JAVA_ONLY = {
    "default.api.timeout.ms": "the Java client's timeout of its blocking calls",
    "max.block.ms": "how long the Java producer's send() blocks on a full buffer",
    "buffer.memory": "the Java producer's buffer (librdkafka's is "
                     "queue.buffering.max.kbytes, which --client-config takes)",
    "key.serializer": "a Java class", "value.serializer": "a Java class",
    "key.deserializer": "a Java class", "value.deserializer": "a Java class",
}
HANDLED = {*AS_FLAGS, *JAVA_ONLY, "bootstrap.servers"}


def read_driver(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """What a driver file gives the run: {"connection": {...}, "producer": {...},
    "consumer": {...}, "left_out": [(key, why)]}, each the options of a profile's
    connection or group. ValueError says which key is wrong and why."""
    for key in data:
        if key not in KEYS:
            raise ValueError(f"{key}: not a key of OMB's Kafka driver files ({', '.join(KEYS)})")
    driver = str(data.get("driverClass") or "")
    if not driver.endswith("KafkaBenchmarkDriver"):
        raise ValueError(f"driverClass: {driver or 'none'!r} is not OMB's Kafka driver "
                         "(io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver): "
                         "only Kafka driver files are read")
    out: dict[str, Any] = {"connection": {}, "producer": {}, "consumer": {}, "left_out": []}
    if "replicationFactor" in data:
        replication = data["replicationFactor"]
        if not isinstance(replication, int) or isinstance(replication, bool) or replication < 1:
            raise ValueError(f"replicationFactor: a whole number from 1, got {replication!r}")
        for side in ("producer", "consumer"):
            out[side]["replication"] = replication
    # reset (delete the driver's topics first): every run here makes topics of its own.
    topic = section_properties(data, "topicConfig", str(path))
    if topic:
        for side in ("producer", "consumer"):
            out[side]["topic-config"] = [f"{k}={v}" for k, v in topic.items()]
    for section, sides in SECTIONS.items():
        properties = section_properties(data, section, str(path))
        for key, value in properties.items():
            if key == "bootstrap.servers":
                host, _, port = value.split(",")[0].strip().rpartition(":")
                if not host or not port.isdigit():
                    raise ValueError(f"{section}: bootstrap.servers: {value!r} is not "
                                     "HOST:PORT")
                out["connection"].update(host=host, port=int(port))
            elif key in JAVA_ONLY:
                out["left_out"].append((key, JAVA_ONLY[key]))
            elif key in AS_FLAGS:
                flag, convert = AS_FLAGS[key]
                try:
                    converted = convert(value)
                except ValueError as exc:
                    raise ValueError(f"{section}: {key}: {exc}") from None
                for side in sides:
                    out[side][flag] = converted
        if set(properties) - HANDLED:  # the rest, read by librdkafka from the file
            for side in sides:
                out[side].setdefault("client-config", []).append(
                    f"@{path.resolve()}#{section}")
    return out
