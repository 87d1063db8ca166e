"""OpenMessaging Benchmark's workload files, as they are: a workload's keys made into the
groups, run settings and search of a profile (a profile's `omb:` key, `harness run --omb`).

A workload describes topics, producers and subscriptions; the harness has worker groups
with a destination, a role and threads. One producer group holds every producer (its
threads take the topics in turn, -dx), one consumer group every consumer: a single
subscription of several consumers is a queue whose receivers compete (Sender and
Receiver), several subscriptions of one consumer each are subscribers that each see every
message (Publisher and Subscriber). A key the harness cannot honour is refused by name.
"""

from __future__ import annotations

import math
import re
import uuid
from pathlib import Path
from typing import Any

from harness.plan.options import table
from harness.textfiles import load_yaml, read_text

# Every key of OMB's Workload, with its default there. The value of a key whose default is
# None must be given.
DEFAULTS: dict[str, Any] = {
    "name": None, "topics": None, "partitionsPerTopic": None, "keyDistributor": "NO_KEY",
    "messageSize": None, "useRandomizedPayloads": False, "randomBytesRatio": 0.0,
    "randomizedPayloadPoolSize": 0, "payloadFile": "", "subscriptionsPerTopic": None,
    "producersPerTopic": None, "consumerPerSubscription": None,
    "messageRateReceivedForSubscription": 100, "producerRate": None,
    "producerStartRate": 10_000, "acceptableBacklog": 10_000, "producerIncrementRate": 0,
    "producerIncrementSeconds": 60, "consumerBacklogSizeGB": 0,
    "producerPauseBeforeDrain": 0, "producerPauseDuringDrain": 0,
    "testDurationMinutes": None, "warmupDurationMinutes": 1, "messageSizeDistribution": None,
}
# OMB's key distributors and the harness's --keys that do the same to partitions.
KEY_DISTRIBUTORS = {"NO_KEY": "none", "KEY_ROUND_ROBIN": "sequence", "ROUND_ROBIN": "sequence",
                    "RANDOM_NANO": "random"}
# What the harness does not do, by the value that asks for it (OMB's default is fine).
NOT_HONOURED = {
    "messageRateReceivedForSubscription": "OMB's filtered subscriptions (a share of the "
                                          "messages each) are not modelled",
    "producerIncrementRate": "a rate raised in steps (from producerStartRate by this every "
                             "producerIncrementSeconds) is not mapped yet; --rate-steps makes "
                             "such steps",
    "producerPauseBeforeDrain": "producers paused before the drain are not modelled: the "
                                "harness's producers keep their rate while a backlog drains",
    "producerPauseDuringDrain": "producers paused during the drain are not modelled: the "
                                "harness's producers keep their rate while a backlog drains",
    "messageSizeDistribution": "a size distribution (a fork's key, not OMB's own) is not "
                               "read; give messageSize",
}
# OMB's gigabyte: consumerBacklogSizeGB * 1024 * 1024 * 1024 bytes.
GB = 1 << 30
POSITIVE = ("topics", "partitionsPerTopic", "messageSize", "producersPerTopic",
            "testDurationMinutes")


class WorkloadError(ValueError):
    """A workload key the harness cannot read or honour: key, and what is wrong."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


def read_workload(source: Any, base: Path, key: str = "omb"
                  ) -> tuple[dict[str, Any], Path | None]:
    """The workload's keys (a mapping, or the path of a YAML file relative to `base`), and
    the file it came from; with key omb-driver, a driver file's."""
    import yaml

    what = "driver" if key == "omb-driver" else "workload"
    if isinstance(source, dict):
        return source, None
    if not isinstance(source, str) or not source:
        raise WorkloadError(key, f"names an OpenMessaging Benchmark {what} file, or holds "
                                 "its keys")
    path = Path(source).expanduser()
    if not path.is_absolute():
        path = base / path
    try:
        data = load_yaml(read_text(path, key), f"{key} ({path})")
    except yaml.YAMLError as exc:
        raise WorkloadError(key, f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise WorkloadError(key, f"{path} is not a mapping of {what} keys")
    return data, path


def driver_parts(source: str, transport: str, base: Path) -> dict[str, Any]:
    """What an OpenMessaging Benchmark driver file gives the run on `transport` (the
    transport's omb_driver reader: {"connection", "producer", "consumer", "left_out"})."""
    from harness.modules import TRANSPORTS, transport_class

    readers = [name for name in TRANSPORTS if hasattr(transport_class(name), "omb_driver")]
    reader = getattr(transport_class(transport), "omb_driver", None)
    if reader is None:
        raise WorkloadError("omb-driver", f"driver files are read for {', '.join(readers)}, "
                                          f"not {transport}")
    data, path = read_workload(source, base, "omb-driver")
    assert path is not None  # a file: the settings left to the client are read from it
    try:
        return reader(data, path)
    except ValueError as exc:
        raise WorkloadError("omb-driver", f"{path}: {exc}") from None


def _number(workload: dict[str, Any], key: str, kind: type = int) -> Any:
    value = workload.get(key, DEFAULTS[key])
    if value is None:
        raise WorkloadError(key, "is required")
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or (kind is int and value != int(value)):
        raise WorkloadError(key, f"must be a {'whole ' if kind is int else 'finite '}number, "
                                 f"got {value!r}")
    if value < 0 or (key in POSITIVE and value <= 0):
        raise WorkloadError(key, f"must be {'above' if key in POSITIVE else 'at least'} 0, "
                                 f"got {value:g}")
    return kind(value)


def _takes(transport: str, key: str) -> bool:
    option = table().get(key)
    return option is not None and (not option.transports or transport in option.transports)


def profile_parts(workload: dict[str, Any], transport: str, connection: str,
                  file: Path | None) -> dict[str, Any]:
    """The groups, run settings and (for producerRate 0) search that run this workload on
    `transport` through the profile's connection `connection`. WorkloadError names the
    first key that cannot be honoured."""
    for key in workload:
        if key not in DEFAULTS:
            raise WorkloadError(str(key), "is not a key of an OpenMessaging Benchmark workload")
    for key, why in NOT_HONOURED.items():
        if workload.get(key) is not None and workload[key] != DEFAULTS[key]:
            raise WorkloadError(key, why)
    topics = _number(workload, "topics")
    partitions = _number(workload, "partitionsPerTopic")
    size = _number(workload, "messageSize")
    producers = _number(workload, "producersPerTopic")
    subscriptions = _number(workload, "subscriptionsPerTopic")
    consumers = _number(workload, "consumerPerSubscription")
    rate = _number(workload, "producerRate", float)
    minutes = _number(workload, "testDurationMinutes", float)
    warmup = _number(workload, "warmupDurationMinutes", float)
    if subscriptions > 0 and consumers == 0:
        raise WorkloadError("consumerPerSubscription", "must be at least 1 where there are "
                                                       "subscriptions")
    if subscriptions > 1 and consumers > 1:
        raise WorkloadError("subscriptionsPerTopic", f"{subscriptions} subscriptions of "
                            f"{consumers} competing consumers each cannot be run: the "
                            "harness's consumers of a topic either compete (one subscription) "
                            "or each see every message (one consumer a subscription)")
    distributor = str(workload.get("keyDistributor", "NO_KEY"))
    if distributor not in KEY_DISTRIBUTORS:
        raise WorkloadError("keyDistributor", f"{distributor!r}: one of "
                                              f"{', '.join(KEY_DISTRIBUTORS)}")
    for key, value, default in (("partitionsPerTopic", partitions, 1),
                                ("keyDistributor", KEY_DISTRIBUTORS[distributor], "none")):
        option = {"partitionsPerTopic": "partitions", "keyDistributor": "keys"}[key]
        if value != default and not _takes(transport, option):
            raise WorkloadError(key, f"{transport} has no partitions to spread over (a "
                                     f"transport with --{option}, such as kafka, has)")
    randomized = workload.get("useRandomizedPayloads", False)
    if not isinstance(randomized, bool):
        raise WorkloadError("useRandomizedPayloads", f"must be true or false, got "
                                                     f"{randomized!r}")
    pool = _number(workload, "randomizedPayloadPoolSize") if randomized else 0
    ratio = _number(workload, "randomBytesRatio", float) if randomized else 0.0
    if randomized and pool == 0:
        raise WorkloadError("randomizedPayloadPoolSize", "must be at least 1 with "
                                                         "useRandomizedPayloads")
    if ratio > 1:
        raise WorkloadError("randomBytesRatio", f"is a share of each payload, 0 to 1, got "
                                                f"{ratio:g}")
    backlog_gb = _number(workload, "consumerBacklogSizeGB", float)
    if backlog_gb and not subscriptions:
        raise WorkloadError("consumerBacklogSizeGB", "a backlog is built for consumers: give "
                                                     "subscriptionsPerTopic")
    # OMB sends payloadFile's bytes unless its payloads are randomized.
    payload = "" if randomized else workload.get("payloadFile") or ""
    if payload:
        path = Path(str(payload)).expanduser()
        # OMB reads it from its working directory (where its payload/ folder is); a
        # workload kept elsewhere may name it beside itself.
        if not path.is_absolute() and not path.exists() and file is not None:
            path = file.parent / path
        if not path.is_file():
            raise WorkloadError("payloadFile", f"cannot read {payload!r} (relative paths are "
                                               "taken from the current folder, as OMB takes "
                                               "them, then from the workload file's)")
        if path.stat().st_size != size:
            raise WorkloadError("payloadFile", f"{payload!r} holds {path.stat().st_size} "
                                               f"bytes, not messageSize {size}")
    name = re.sub(r"[^A-Za-z0-9]+", "-", str(workload.get("name") or "")).strip("-")
    name = f"omb-{name}" if name else "omb"
    # A new set of topics per workload, as OMB makes them: a consumer group reading from
    # the earliest offset never meets another run's messages.
    topic = f"{name[:40].rstrip('-')}-{uuid.uuid4().hex[:6]}"
    where = {"destination": topic} if topics == 1 else \
        {"destination": f"{topic}-", "destination-max": topics}
    compete = subscriptions == 1
    producer: dict[str, Any] = {
        "name": "producer", "connection": connection,
        "module": "Sender" if compete else "Publisher", **where,
        "threads": topics * producers, "size": size, "rate": rate}
    if payload:
        producer["body-file"] = str(path)
    if randomized:
        producer["payload-pool"] = pool
        producer["random-ratio"] = ratio
    if partitions != 1:
        producer["partitions"] = partitions
    if distributor != "NO_KEY":
        producer["keys"] = KEY_DISTRIBUTORS[distributor]
    groups = [producer]
    if subscriptions:
        consumer: dict[str, Any] = {
            "name": "consumer", "connection": connection,
            "module": "Receiver" if compete else "Subscriber", **where,
            "threads": topics * (consumers if compete else subscriptions)}
        if partitions != 1:
            consumer["partitions"] = partitions
        groups.append(consumer)
    parts: dict[str, Any] = {
        "groups": groups,
        "run": {"run-length": round((minutes + warmup) * 60, 3),
                "warmup": round(warmup * 60, 3), "name": name[:40].rstrip("-")}}
    if backlog_gb:
        # OMB's backlog phase: consumers held while the producers fill their topics to
        # this many bytes, then released to drain it (the harness's --backlog).
        parts["run"]["backlog"] = f"{round(backlog_gb * GB)}B"
    if rate == 0:
        # OMB's producerRate 0 looks for the highest rate the consumers keep up with: here a
        # capacity search of the producers' rate, each probe a run of the workload's length,
        # passing while the backlog does not grow (acceptableBacklog's purpose there).
        start = _number(workload, "producerStartRate", float)
        # OMB's max-rate search lowers the rate where more than acceptableBacklog messages
        # wait: a probe passes here only with its backlog stable and at most that at the end.
        acceptable = _number(workload, "acceptableBacklog")
        parts["search"] = {"field": "groups.producer.rate", "start": start or 10_000,
                           "criteria": {"backlog": "stable", "backlog-max": acceptable,
                                        "loss": 0}}
        producer["rate"] = start or 10_000
    return parts
