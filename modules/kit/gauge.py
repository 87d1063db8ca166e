"""When a consumer next asks its broker how many messages wait for it (a queue's depth, a
stream consumer's pending, a consumer group's lag): at most once a second, as often as
librdkafka reports a Kafka partition's lag, from the transport's own receive (and, for a
consumer held by --backlog, its flush), never from inside the statistics. The answer goes
to the feedback (Feedback.waiting), which the worker hands over at each interval boundary.

Asked by a consumer of one connection a thread only: thousands of clients of --clients
asking each second would be a load on the broker of their own."""

from __future__ import annotations

import time
from collections.abc import Callable

GAUGE_EVERY_S = 1.0


class Gauge:
    __slots__ = ("ask", "at")

    def __init__(self, ask: Callable[[], None]) -> None:
        self.ask = ask  # sends the question; the answer comes now or on a later turn
        self.at = 0.0

    def tick(self) -> None:
        now = time.monotonic()
        if now >= self.at:
            self.at = now + GAUGE_EVERY_S
            self.ask()
