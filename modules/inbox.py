"""A hand-off queue between threads: a deque (atomic append and popleft in CPython) with a
condition that only blocked consumers pay for.

The loopback broker's queues are inboxes; the network transports put what their client
library's network thread receives into one, for the worker thread to take.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Full(Exception):
    """An inbox with a capacity stayed full for its whole timeout."""


class Inbox(Generic[T]):
    __slots__ = ("capacity", "cond", "full_timeout", "items", "waiters")

    def __init__(self, capacity: int = 0, full_timeout: float = 1.0) -> None:
        self.items: deque[T] = deque()
        self.cond = threading.Condition(threading.Lock())
        self.waiters = 0
        self.capacity = capacity
        self.full_timeout = full_timeout

    def put(self, item: T) -> None:
        if self.capacity and len(self.items) >= self.capacity:
            self._wait_for_space()
        self.items.append(item)
        # A consumer registers as a waiter before re-checking the deque under the lock, so
        # either it sees this item or we see it waiting: no lost wake-up.
        if self.waiters:
            with self.cond:
                self.cond.notify()

    def _wait_for_space(self) -> None:
        deadline = time.monotonic() + self.full_timeout
        while len(self.items) >= self.capacity:
            if time.monotonic() >= deadline:
                raise Full(f"{self.capacity:,} items")
            time.sleep(0.001)

    def put_front(self, items: list[T]) -> None:
        self.items.extendleft(reversed(items))
        if self.waiters:
            with self.cond:
                self.cond.notify_all()

    def get(self, timeout: float) -> T | None:
        items = self.items
        try:
            return items.popleft()
        except IndexError:
            pass
        with self.cond:
            self.waiters += 1
            try:
                if not items:
                    self.cond.wait(timeout)
            finally:
                self.waiters -= 1
        try:
            return items.popleft()
        except IndexError:
            return None

    def __len__(self) -> int:
        return len(self.items)
