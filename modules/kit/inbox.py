"""A hand-off queue between threads: a deque (atomic append and popleft in CPython) and a
lock used as a wake-up signal, which only a consumer that finds the deque empty waits on.

threading.Condition is pure Python: its notify and wait cost microseconds a message whenever
a consumer keeps up and sleeps between messages. A Lock's acquire (with a timeout) and release
are C: the producer pays one release, and only while someone waits.

The loopback broker's queues are inboxes; the network transports put what their client
library's network thread receives into one, for the worker thread to take.

A consumer that waits on many descriptors at once (many clients a thread) watches an inbox
instead: it gives an eventfd, takes what is there, and arms the inbox; the next put writes to
the eventfd once and disarms it. The consumer arms only after finding the deque empty, and
looks once more after arming, so no put is missed.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Full(Exception):
    """An inbox with a capacity stayed full for its whole timeout."""


class Inbox(Generic[T]):
    __slots__ = ("armed", "capacity", "full_timeout", "items", "mutex", "signal", "turn",
                 "waiters", "watchers")

    def __init__(self, capacity: int = 0, full_timeout: float = 1.0) -> None:
        self.items: deque[T] = deque()
        self.mutex = threading.Lock()
        # Released = "something arrived"; acquired by the consumer that takes the signal.
        self.signal = threading.Lock()
        self.signal.acquire()
        self.waiters = 0
        self.capacity = capacity
        self.full_timeout = full_timeout
        self.watchers: list[int] = []  # eventfds of consumers that watch (watch())
        self.armed = False
        self.turn = 0  # the watcher the next ring goes to: one wakes, and takes what is there

    def _wake(self) -> None:
        signal = self.signal
        # Until the woken consumer runs, every put finds it still waiting: a raised
        # RuntimeError per put would cost more than the rest of the hand-off.
        if signal.locked():
            try:  # noqa: SIM105 - contextlib.suppress costs more on this per-message path
                signal.release()
            except RuntimeError:
                pass  # another producer released it since locked() was read

    def interrupt(self) -> None:
        """Make a get() that waits, or the next one, return now (None if nothing came)."""
        self._wake()

    def put(self, item: T) -> None:
        if self.capacity and len(self.items) >= self.capacity:
            self._wait_for_space()
        self.items.append(item)
        # A consumer counts itself as a waiter before re-checking the deque, so either it
        # sees this item or we see it waiting: no lost wake-up.
        if self.waiters:
            self._wake()
        if self.armed:
            self.ring()

    # -- watched by consumers that wait on an eventfd
    def watch(self, fd: int) -> None:
        self.watchers.append(fd)
        if not self.arm():
            self.ring()  # what is there already

    def unwatch(self, fd: int) -> None:
        if fd in self.watchers:
            self.watchers.remove(fd)

    def arm(self) -> bool:
        """After taking everything: the next put rings. False where something came
        meanwhile (take it, then arm again)."""
        self.armed = True
        return not self.items

    def ring(self) -> None:
        """Wake one watcher (in turn, where several compete for a queue)."""
        self.armed = False
        watchers = self.watchers
        if watchers:
            self.turn += 1
            try:  # noqa: SIM105 - on the loopback's per-message path
                os.eventfd_write(watchers[self.turn % len(watchers)], 1)
            except (OSError, IndexError):
                pass  # unwatched meanwhile

    def _wait_for_space(self) -> None:
        deadline = time.monotonic() + self.full_timeout
        while len(self.items) >= self.capacity:
            if time.monotonic() >= deadline:
                raise Full(f"{self.capacity:,} items")
            time.sleep(0.001)

    def put_front(self, items: list[T]) -> None:
        self.items.extendleft(reversed(items))
        if self.waiters:
            self._wake()
        if self.armed:
            self.ring()

    def get(self, timeout: float) -> T | None:
        items = self.items
        if timeout <= 0 and not items:
            return None  # a look, not a wait: no exception, no locks, no signal taken
        try:
            return items.popleft()
        except IndexError:
            pass
        with self.mutex:
            self.waiters += 1
        try:
            if not items:
                self.signal.acquire(timeout=timeout)
        finally:
            with self.mutex:
                self.waiters -= 1
        try:
            item = items.popleft()
        except IndexError:
            return None
        # One signal wakes one consumer: pass it on while items and waiters remain.
        if items and self.waiters:
            self._wake()
        return item

    def __len__(self) -> int:
        return len(self.items)
