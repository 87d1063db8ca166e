"""Many clients on one worker thread (--clients).

A client is a producer with a connection, an identity and a schedule of its own: built as the
role's worker for its client number (so that its producer id, destination, phase in the
group's schedule, properties and deck are what a thread of that number would have) but never
started as a thread. The group's threads each drive their share of the clients (client k on
thread k mod -nt): one thread connects them at --connect-rate, one at a time while
connections are quick and up to CONNECTS_AT_ONCE at a time while they are slow (each on a
connector thread, so that a broker slow to answer, or far away, holds one connection and not
the clients behind it), timing each connection to the broker's answer
(the connect histogram), sends each client's messages as they fall due (the
clients' schedules merged in one heap), and waits on every client's socket at once
(Multiplexed), turning only the client whose socket has something to read. Every message is
measured as a thread's is, into the thread's one buffer: one hand-off an interval, however
many clients.
"""

from __future__ import annotations

import contextlib
import heapq
import select
from collections import Counter
from collections.abc import Callable

from harness.clock import EPOCH_OFFSET_NS, now_ns
from harness.engine.client_connections import RETRY_NS, ClientConnections
from harness.engine.connector import FAR, Connector
from harness.engine.paced import MAX_SLEEP_S
from harness.engine.roles import Consumer
from harness.engine.worker import Worker, WorkerSetup
from harness.modules.interface.base import TransportError
from harness.modules.interface.message import Message, plain_frame
from harness.modules.interface.optional import ClientLoop, FramedSends, Multiplexed

# Each client's connection is tended (written out, kept alive, reconnected) at least this
# often, a slice of the clients at a time.
TEND_EVERY_NS = 1_000_000_000
TEND_SLICES = 10
# A client whose connection was lost is tended this often until it is up again: its
# client library reconnects only while it is turned, and the tending of every client
# comes round only every TEND_EVERY_NS.
DOWN_TEND_NS = 250_000_000


class Clients(ClientConnections, Worker):
    """A worker thread that drives many producer clients."""

    def __init__(self, setup: WorkerSetup, clients: list[Worker]) -> None:
        super().__init__(setup)
        self.clients = clients
        self.heads = [client.producer_id.encode() for client in clients]
        self.consumes = self.role.consumes
        for client in clients:
            client.rec = self.rec  # one buffer for the thread, one hand-off an interval
            client.outage_counted = 0
            assert isinstance(client.transport, Multiplexed)
            client.transport.multiplexed()
            if isinstance(client, Consumer):
                client.ready()
                # This thread ends the intervals: it settles every client's arrivals first.
                client.next_boundary = FAR
                for checks in (client.tracker, client.seen):
                    if checks is not None:
                        checks.rec = self.rec
        group = self.group
        # This thread's share of its process's connection rate.
        share = group.connect_rate * len(clients) / group.clients
        self.connect_gap = int(1e9 / share) if share else 0
        self.started: list[int] = []  # the clients connected once, by index
        self.heap: list[tuple[int, int]] = []  # (intended send ns, client index)
        self.order = 0  # an unthrottled client's turn
        # Churn: (when, client index) of each client's next reconnection, and the clients
        # whose reconnection failed (closed until a retry).
        self.churn_ns = int(group.reconnect_every * 1e9)
        self.churn: list[tuple[int, int]] = []
        self.closed: set[int] = set()
        self.down: set[int] = set()  # clients whose connection was lost, until it is up
        self.failures: Counter[str] = Counter()  # this interval's failed connections, by reason
        self.epoll = select.epoll()
        self.fds: dict[int, int] = {}  # socket -> client index
        self.registered = [-1] * len(clients)
        self.connector = Connector(self.name, lambda i: self.clients[i].transport.open())
        self.epoll.register(self.connector.woken, select.EPOLLIN)

    # -- the loop
    def work(self) -> None:
        group, control = self.group, self.control
        clients, heap = self.clients, self.heap
        paced = self.clients[0].schedule is not None
        framed = isinstance(clients[0].transport, FramedSends) and \
            clients[0].out.correlation is None and not any(clients[0].out.property_sets)
        loops = isinstance(clients[0].transport, ClientLoop)
        persistent = group.persistent
        after = group.reconnect_after
        offset = EPOCH_OFFSET_NS
        # Not yet connected: (not before, index), in client order.
        connected = set(self.started)
        waiting = [(0, i) for i in range(len(clients)) if i not in connected]
        next_connect = now_ns()
        for i in self.started:  # connected before the run
            self._begin(i, next_connect)
        tend_at, tend_from = next_connect + TEND_EVERY_NS // TEND_SLICES, 0
        down_at = 0
        down = self.down
        epoll_poll = self.epoll.poll
        most_ns = int(MAX_SLEEP_S * 1e9)
        consumes = self.consumes
        drain_look = 0
        asleep_at = FAR  # when the loop last went to sleep in a wait for what falls due
        while control.consuming if consumes else control.producing:
            if self.pending and not self._apply_pending():
                break
            now = now_ns()
            until = FAR if consumes else control.produce_until_ns
            if now >= until and not (paced and heap and asleep_at <= heap[0][0] < until):
                self._unsent(until)
                break
            if now >= self.next_boundary and not (heap and heap[0][0] < self.next_boundary
                                                  and paced):
                self.flush(now)
            if now >= tend_at:
                tend_at = now + TEND_EVERY_NS // TEND_SLICES
                tend_from = self._tend(tend_from)
            if down and now >= down_at:
                down_at = now + DOWN_TEND_NS
                self._tend_down()
            opened = self.connector.opened
            while opened:  # attempts that ended, each begun at the connect rate
                i = opened.popleft()
                if not self._try_open(i, here=False):
                    heapq.heappush(waiting, (now + RETRY_NS, i))
                now = now_ns()
            if waiting and now >= self.connector.begin_at(max(next_connect, waiting[0][0])):
                # One connection begun a turn, then what fell due meanwhile.
                _, i = heapq.heappop(waiting)
                if not self.connector.here():
                    self.connector.start(i)
                elif not self._try_open(i, here=True):
                    heapq.heappush(waiting, (now + RETRY_NS, i))
                # Behind the connect rate (slow handshakes), by at most a second's worth.
                next_connect = max(next_connect + self.connect_gap, now - 1_000_000_000)
                now = now_ns()
            churn = self.churn
            if churn and churn[0][0] <= now:
                _, i = churn[0]
                heapq.heapreplace(churn, (now + self.churn_ns, i))
                self._reopen(i)
                now = now_ns()
            if heap and (not paced or heap[0][0] <= now):
                intended, i = heap[0]
                if not paced:
                    intended = now
                elif intended >= self.next_boundary:
                    self.flush(intended)
                client = clients[i]
                outages = client.transport.outages
                was_down = outages.down_since is not None
                self._send(i, framed, persistent, intended, now, offset)
                if loops and i not in self.closed:
                    self._flush_client(client)
                if was_down or outages.down_since is not None:
                    self._watch(i)  # a new socket, or none
                    self._lost(i)
                if after and client.out.position % after == 0:
                    self._reopen(i)

                if paced:
                    heapq.heapreplace(heap, (client.schedule.next_ns(), i))  # type: ignore[union-attr]
                else:
                    self.order += 1
                    heapq.heapreplace(heap, (self.order, i))
                    self._poll(epoll_poll, 0)
                continue
            due = min(heap[0][0] if heap else FAR, self.next_boundary, until, tend_at,
                      self.connector.begin_at(max(next_connect, waiting[0][0])) if waiting else FAR,
                      churn[0][0] if churn else FAR, down_at if down else FAR,
                      now + most_ns)
            if consumes and control.draining and not self.setup.checked and \
                    now >= drain_look:
                # Nothing came for a while in the drain: looked for every 50 ms, not at
                # each wake-up (a look reads every client).
                drain_look = now + most_ns
                if now - max(c.last for c in clients) >= control.drain_idle_ns:  # type: ignore[attr-defined]
                    break
            # The sends that fall due while the loop sleeps are made when it wakes, late or
            # not, as a thread makes the send it slept until (Worker.pace): woken past the
            # stop, they are not counted unsent.
            asleep_at = now
            self._poll(epoll_poll, max(due - now, 0) / 1e9)
        if consumes:
            for client in clients:
                client.done = True  # type: ignore[attr-defined]
            self._settle()

    def _send(self, i: int, framed: bool, persistent: bool, intended: int, now: int,
              offset: int) -> None:
        client = self.clients[i]
        rec, transport, out = self.rec, client.transport, client.out
        seq = out.position
        if i in self.closed:  # its reconnection failed: a send that cannot be made
            out.position = seq + 1
            rec.error("send", "not connected: its reconnection failed")
            rec.failed += 1
            out.failed.append(seq)
            return
        body, crc = out.body, out.crc
        if out.deck:
            body, crc = out.deck[seq % len(out.deck)]
        try:
            if framed:
                transport.send_frame(  # type: ignore[attr-defined]
                    client.destination, plain_frame(self.heads[i], seq, intended + offset,
                                                    now + offset, crc, body), seq)
            else:
                properties = out.property_sets[seq % len(out.property_sets)]
                transport.send(client.destination, Message(
                    body, client.producer_id, seq, intended + offset, now + offset, crc,
                    properties, out.correlation, None, persistent))
        except TransportError as exc:
            out.position = seq + 1
            client.send_failed(seq, len(body), intended, exc)  # into the shared buffer
            return
        done = now_ns()
        out.position = seq + 1
        rec.service.append((done - now) // 1000)
        if client.schedule is not None:
            rec.delay.append((now - intended) // 1000)
        rec.sent += 1
        rec.bytes += len(body)

    def _flush_client(self, client: Worker) -> None:
        try:
            client.transport.flush()  # type: ignore[attr-defined]
        except TransportError as exc:
            client.call_failed("flush", exc)

    def _poll(self, poll: Callable[[float], list[tuple[int, int]]], timeout: float) -> None:
        # In whole milliseconds: the sends due in one are made together after it, as a bare
        # loop's are (a wait to the microsecond costs a wake-up a send).
        events = poll(timeout)
        clients, fds = self.clients, self.fds
        for socket, _ in events:
            i = fds.get(socket)
            if i is None:
                if socket == self.connector.woken:  # an attempt ended: work() takes it
                    self.connector.heard()
                continue
            transport = clients[i].transport
            try:
                transport.readable()  # type: ignore[attr-defined]
            except TransportError as exc:
                clients[i].call_failed("receive", exc)
            if transport.outages.down_since is not None:
                self._watch(i)  # lost: its socket is gone
                self.down.add(i)

    def _lost(self, i: int) -> None:
        if self.clients[i].transport.outages.down_since is not None:
            self.down.add(i)

    def _tend_down(self) -> None:
        """Tend the clients whose connection was lost; those up again are no longer."""
        clients, down = self.clients, self.down
        for i in list(down):
            if i not in self.closed:
                self._flush_client(clients[i])
                self._watch(i)
            if clients[i].transport.outages.down_since is None:
                down.discard(i)

    def _tend(self, first: int) -> int:
        """Tend the next slice of the connected clients; returns where the next slice
        begins."""
        started = self.started
        if not started or not isinstance(self.clients[0].transport, ClientLoop):
            return 0
        size = -(-len(started) // TEND_SLICES)
        first %= len(started)
        for i in started[first:first + size]:
            if i not in self.closed:
                self._flush_client(self.clients[i])
                self._watch(i)
        return first + size

    def _unsent(self, until: int) -> None:
        """The sends each client had due before the stop and never made, counted as a late
        thread's are (Worker.unsent)."""
        for intended, i in self.heap:
            client = self.clients[i]
            if client.schedule is not None and intended < until:
                client.unsent(intended, until)

    def hold(self) -> None:
        self._tend(0)
        self._poll(self.epoll.poll, MAX_SLEEP_S)

    def take_rate(self, rate: float | None, resumed: bool) -> None:
        """Every client's schedule again from now, each in its place."""
        first = self.clients[0].schedule
        if first is None:
            return
        rate = first.rate if rate is None else rate
        if rate != first.rate or resumed:
            now = now_ns()
            heap = []
            for i in self.started:
                schedule = self.clients[i].schedule
                assert schedule is not None
                schedule.retarget(now, rate)
                heap.append((schedule.next_ns(), i))
            heapq.heapify(heap)
            self.heap[:] = heap

    # -- what the thread reports
    def _settle(self) -> None:
        """Measure what every client took in since its last settle (Consumer.settle)."""
        for client in self.clients:
            if client.arrivals:  # type: ignore[attr-defined]
                client.settle()  # type: ignore[attr-defined]

    def _tally(self) -> None:
        """The interval's failed connections by reason, in a note for the log."""
        if self.failures:
            tally = "; ".join(f"{n:,} × {reason}" for reason, n in self.failures.most_common())
            self.rec.notes.append(f"{self.failures.total():,} connections failed: {tally}")
            self.failures.clear()

    def hand_off_last(self) -> None:
        self._tally()  # the last interval's failed connections, as every other's
        super().hand_off_last()

    def flush(self, at: int) -> None:
        self._tally()
        if self.consumes:
            self._settle()
            for client in self.clients:
                if client.tracker is not None:
                    client.tracker.expire(at)
        super().flush(at)

    @property
    def count(self) -> int:
        """A consumer's messages received (the cell's balance)."""
        return sum(getattr(client, "count", 0) for client in self.clients)

    def mark_span(self, phase: str) -> None:
        for client in self.clients:  # each its own stream of numbers
            client.out.mark_span(phase)

    def take_outage(self) -> None:
        clients = self.clients
        for i in self.started:
            clients[i].take_outage()

    def kept(self) -> int:
        return sum(client.kept() for client in self.clients)

    def stream_end(self) -> list[dict[str, object]]:
        self._tally()  # before the thread's last sample
        ends = []
        for client in self.clients:  # each client a producer, or a consumer, of its own
            if client.tracker is not None:
                client.tracker.finish()
            ends += client.stream_end()
        return ends

    def close(self) -> None:
        clients = self.clients
        try:
            self._stop_connector()
            for i in self.started:
                with contextlib.suppress(Exception):  # each client closes as it can
                    clients[i].transport.close()
        finally:
            self.epoll.close()
            self.connector.close()
