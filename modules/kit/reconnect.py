"""What transports that notice a lost connection themselves share: the next call opens it
again, at most every RECONNECT_EVERY_S, makes the subscription again on it, and counts the
outage."""

from __future__ import annotations

import time
from abc import abstractmethod

from harness.modules.interface.base import ROLLED_BACK, TransportError
from harness.modules.interface.message import Destination

RECONNECT_EVERY_S = 0.5


class Reconnecting:
    """A mixin for a Transport: set `connected` False when the connection is lost."""

    connected = False
    last_attempt = 0.0
    transaction_open = False  # a producer's, from its first begin(): every send is in one
    subscription: Destination | None = None

    @abstractmethod
    def _reopen(self) -> None:
        """Drop what is left of the lost connection and connect again."""

    @abstractmethod
    def _subscribe(self, destination: Destination) -> None:
        """Start consuming from destination on the current connection."""

    def _check(self) -> None:
        """Reconnect a lost connection, or raise TransportError."""
        if self.connected:
            return
        # Down from the moment it is found down, before the back-off below refuses a call:
        # the worker counts one error an outage only while the transport says it is in one.
        outages = self.outages  # type: ignore[attr-defined]
        outages.went_down()
        now = time.monotonic()
        if now - self.last_attempt < RECONNECT_EVERY_S:
            raise TransportError("not connected")
        self.last_attempt = now
        self._reopen()
        if self.subscription is not None:
            self._subscribe(self.subscription)
        outages.came_up()
        if self.transaction_open:
            # The new connection has a transaction of its own (the transport's open() makes
            # it); what was sent in the old one is gone.
            raise TransportError("the connection was lost, the transaction with it",
                                 kind=ROLLED_BACK)

    def subscribe(self, destination: Destination) -> None:
        self.subscription = destination
        if self.connected:
            self._subscribe(destination)
        else:
            self._check()  # subscribes once connected

    def _ready(self, timeout: float = 0.0) -> None:
        """Before a receive: reconnect, or wait timeout and raise (a dead broker must not
        turn a consumer's loop into a busy one)."""
        if not self.connected:
            try:
                self._check()
            except TransportError:
                time.sleep(timeout)
                raise

    # -- transactions, where the transport has them: one lives and dies with its connection
    def begin(self) -> None:
        self.transaction_open = True
        if not self.connected:
            try:
                self._check()
            except TransportError as exc:
                if exc.kind != ROLLED_BACK:  # rolled back: nothing was sent in it yet
                    raise

    def _ready_to_commit(self) -> None:
        if not self.connected:
            self._check()  # raises ROLLED_BACK once connected again
            raise TransportError("commit: the connection was lost, the transaction with it",
                                 kind=ROLLED_BACK)
