"""What librdkafka's statistics say: the consumers' lag, read each interval and at the end."""

from __future__ import annotations

import contextlib
import json

from confluent_kafka import KafkaException
from harness.modules.interface.settings import Settings
from harness.modules.kafka.common import _lag
from harness.modules.kafka.options import KafkaOptions


class Gauges:
    """The gauges part: librdkafka's statistics, the consumers' lag. The state it uses is
    made in KafkaTransport.__init__."""

    settings: Settings[KafkaOptions]
    o: KafkaOptions

    def _producer_stats(self, text: str) -> None:
        self._stats(text, False)

    def _consumer_stats(self, text: str) -> None:
        self._stats(text, True)

    def _stats(self, text: str, consumer: bool) -> None:
        """librdkafka's statistics (every STATS_MS, served by poll() or consume() on the
        worker's thread): per partition of this client, the rate its sends (txmsgs) or its
        consumer's position (app_offset) advanced by since the last report, and a consumer's
        lag (_lag)."""
        try:
            stats = json.loads(text)
            now = stats["ts"]  # librdkafka's monotonic clock, microseconds
            topics = stats["topics"]
        except (ValueError, KeyError, TypeError):
            return
        if self.down and any(b.get("state") == "UP" and b.get("nodeid", -1) >= 0
                             for b in stats.get("brokers", {}).values()):
            self._up()  # connected again: said by the statistics when no message says it
        seen, mine = self.seen, {}
        for topic, detail in topics.items():
            for number, p in detail.get("partitions", {}).items():
                if number == "-1" or (consumer and not p.get("desired")):
                    continue  # librdkafka's unassigned partition, or one no longer ours
                value = p.get("app_offset" if consumer else "txmsgs", -1)
                key = f"{topic}[{number}]"
                rate, before = 0.0, seen.get(key)
                if before is not None and value >= before[1] >= 0 and now > before[0]:
                    rate = (value - before[1]) * 1e6 / (now - before[0])
                seen[key] = (now, value)
                lag = -1
                if consumer:
                    end = p.get("ls_offset" if self.o.isolation == "read_committed"
                                else "hi_offset", -1)
                    lag = _lag(end, value, p.get("committed_offset", -1))
                mine[key] = (rate, lag)
        self.partitions[consumer] = mine
        self._gauges()

    def _gauges(self) -> None:
        self.feedback.partitions = {**self.partitions[False], **self.partitions[True]}

    def _final_lag(self) -> None:
        """Each partition's lag as the consumer closes, from what the client holds (its
        positions, the end offsets of its last fetches): the last report may be a second
        old, and the run's last interval says what was left."""
        with contextlib.suppress(KafkaException, RuntimeError):
            for tp in self.consumer.position(self.consumer.assignment()):
                key = f"{tp.topic}[{tp.partition}]"
                if key in self.partitions[True]:
                    _, end = self.consumer.get_watermark_offsets(tp, cached=True)
                    rate = self.partitions[True][key][0]
                    self.partitions[True][key] = (rate, _lag(end, tp.offset, -1))
            self._gauges()

