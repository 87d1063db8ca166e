"""The connections of many clients on one worker thread (harness.engine.clients): the first
made before the run, a consumer's all before it at the connect rate, each timed into the
connect histogram, on this thread while connections are quick and on a connector thread
(harness.engine.connector) while they are slow; churn's reconnections; failed attempts
tallied by reason; each client's socket watched. A part of Clients."""

from __future__ import annotations

import contextlib
import heapq
import select
import time
from collections import Counter
from typing import TYPE_CHECKING

from harness.clock import now_ns
from harness.engine.paced import MAX_SLEEP_S
from harness.engine.roles import Consumer
from harness.modules.interface.base import TransportError
from harness.modules.interface.optional import Multiplexed

if TYPE_CHECKING:
    from harness.engine.connector import Connector
    from harness.engine.worker import Control, Worker
    from harness.plan.group import GroupSpec
    from harness.stats.recorder import Recorder

# A client whose connection attempt failed tries again after this long.
RETRY_NS = 1_000_000_000


class ClientConnections:
    """The connecting half of Clients: what it reads of the thread is declared below."""

    clients: list[Worker]
    connector: Connector
    consumes: bool
    connect_gap: int
    started: list[int]
    heap: list[tuple[int, int]]
    order: int
    churn_ns: int
    churn: list[tuple[int, int]]
    closed: set[int]
    failures: Counter[str]
    epoll: select.epoll
    fds: dict[int, int]
    registered: list[int]
    rec: Recorder
    group: GroupSpec
    control: Control
    outage_counted: int

    def prepare(self) -> None:
        """The first client connects before the run, as a thread's connection does: a broker
        that cannot be reached fails the start. A consumer's clients all subscribe before
        the run, at the connect rate, as consumer threads do: one that joined later would
        find the streams begun and count their heads lost."""
        self.outage_counted = 0
        if not self.consumes:
            self._connect(0)
            self.started.append(0)  # it sends from the start of the run (work)
            return
        first = now_ns()
        try:
            for i in range(len(self.clients)):
                if self.connect_gap:
                    wait_ns = first + i * self.connect_gap - now_ns()
                    if wait_ns > 0:
                        time.sleep(wait_ns / 1e9)
                while (at := self.connector.begin_at(now_ns())) > now_ns():
                    self._prepared_if(self.connector.wait(min((at - now_ns()) / 1e9,
                                                              MAX_SLEEP_S)))
                if self.connector.here():
                    self._connect(i)
                    self.started.append(i)
                else:
                    self.connector.start(i)
            while self.connector.opening:
                self._prepared_if(self.connector.wait(MAX_SLEEP_S))
        except BaseException:
            self._stop_connector()
            raise

    def _prepared_if(self, i: int | None) -> None:
        if i is not None:
            self._connected(i, *self.connector.take(i))
            self.started.append(i)

    def _connect(self, i: int) -> int:
        """Open client i's connection on this thread, timed into the connect histogram;
        returns when it was up (monotonic ns), or raises TransportError."""
        return self._connected(i, *self.connector.timed_here(i))

    def _stop_connector(self) -> None:
        self.connector.stop(lambda i: self.clients[i].transport.close())

    def _connected(self, i: int, began: int, up: int) -> int:
        """What follows client i's open() (timed from began to up): its subscription or
        session, and its socket watched; returns when it was ready."""
        client, rec = self.clients[i], self.rec
        rec.connect.append((up - began) // 1000)
        try:
            if isinstance(client, Consumer):
                client.parts()
                assert client.pusher is not None  # a Multiplexed consumer pushes
                client.pusher.deliver(*client.sinks())
                client.session()  # its subscription, timed apart
                up, done = now_ns(), up
                rec.subscribe.append((up - done) // 1000)
            else:
                client.session()
        except TransportError:
            with contextlib.suppress(Exception):
                client.transport.close()
            raise
        self._watch(i)
        return up


    def _begin(self, i: int, done: int) -> None:
        """Client i connected at done: its sends and its churn from then on."""
        client = self.clients[i]
        if self.churn_ns:
            # The first churn one to two periods after it connected, spread over the
            # clients, so that they do not all reconnect at once.
            heapq.heappush(self.churn, (done + self.churn_ns + self.churn_ns * i //
                                        len(self.clients), i))
        schedule = client.schedule
        if self.group.idle or self.consumes:
            return  # kept alive by _tend, nothing to send
        if schedule is not None:
            # It sends from when it connected, keeping its place (phase) in the group's
            # schedule: what fell due before was never due.
            schedule.start = max(done, int(self.control.timeline.start))
            heapq.heappush(self.heap, (schedule.next_ns(), i))
        else:
            self.order += 1
            heapq.heappush(self.heap, (self.order, i))

    def _reopen(self, i: int) -> None:
        """Churn (--reconnect-every, --reconnect-after): close client i's connection and open
        a new one, timed as its first was; where that fails it is closed until a retry."""
        transport = self.clients[i].transport
        if i not in self.closed:
            with contextlib.suppress(Exception):  # what closing says is of no account
                transport.close()
            self._watch(i)
        try:
            self._connect(i)
            self.closed.discard(i)
        except TransportError as exc:
            self._connect_failed(exc)
            self.closed.add(i)
            heapq.heappush(self.churn, (now_ns() + RETRY_NS, i))

    def _try_open(self, i: int, here: bool) -> bool:
        """Client i's first connection, made on this thread (here) or by an attempt that
        ended on a connector thread: it sends from then on."""
        try:
            done = self._connect(i) if here else self._connected(i, *self.connector.take(i))
        except TransportError as exc:
            self._connect_failed(exc)
            return False
        self.started.append(i)
        self._begin(i, done)
        return True

    def _connect_failed(self, exc: TransportError) -> None:
        """A connection attempt failed: an error, a failed connection, and its reason
        tallied (what follows the last colon: the address and the call go before it)."""
        self.rec.error("connect", exc)
        self.rec.connect_failed += 1
        self.failures[str(exc).rsplit(": ", 1)[-1] or type(exc).__name__] += 1

    def _watch(self, i: int) -> None:
        """Wait on the client's socket as it is now (a reconnect opens a new one)."""
        transport = self.clients[i].transport
        assert isinstance(transport, Multiplexed)
        fd, old = transport.fileno(), self.registered[i]
        if fd == old:
            return
        if old >= 0 and self.fds.get(old) == i:
            del self.fds[old]
            with contextlib.suppress(OSError):  # closed with its socket
                self.epoll.unregister(old)
        self.registered[i] = fd
        if fd >= 0:
            try:
                self.epoll.register(fd, select.EPOLLIN)
            except FileExistsError:  # the number of a socket closed without a word
                self.epoll.modify(fd, select.EPOLLIN)
            self.fds[fd] = i

    def clients_up(self) -> int:
        """Clients connected now."""
        clients = self.clients
        return sum(1 for i in self.started
                   if clients[i].transport.outages.down_since is None)
