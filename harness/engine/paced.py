"""A worker's schedule: each send as it falls due (due_sends), the sleeps between sends in
the transport's loop, the interval hand-offs on the way, pauses and live rate changes, and the
sends a late producer never made. A part of Worker (harness.engine.worker), on the message
path: due_sends() runs once a message."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from harness.clock import now_ns
from harness.modules.interface.base import TransportError

if TYPE_CHECKING:
    from harness.engine.outgoing import Outgoing
    from harness.engine.pacing import Schedule
    from harness.engine.worker import Control
    from harness.modules.interface.optional import ClientLoop
    from harness.modules.interface.roles import Role
    from harness.stats.recorder import Recorder

# Longest single sleep while pacing, so that stop requests are seen promptly.
MAX_SLEEP_S = 0.05
# Messages counted one by one as unsent at the stop, at most (a producer stalled for long at a
# high rate is behind by more than this; the rest are not counted).
MAX_UNSENT = 10_000_000


class Paced:
    """The pacing half of a Worker: what it reads of the worker is declared below."""

    control: Control
    loop: ClientLoop
    schedule: Schedule | None
    out: Outgoing
    rec: Recorder
    role: Role
    key: tuple[int, int]
    next_boundary: int
    # Live changes from the controller: set Control.rates or Control.paused, then pending,
    # which due_sends() checks once per message.
    pending: bool
    # Worker's own: the interval's hand-off, and a failed call counted (harness.engine.tally)
    flush: Callable[[int], None]
    call_failed: Callable[[str, TransportError], None]

    def flush_sends(self) -> None:
        """What is queued goes out before the thread sleeps; a failure is counted, and the
        thread goes on (the next send reconnects)."""
        try:
            self.loop.flush()
        except TransportError as exc:
            self.call_failed("flush", exc)

    def wait(self, seconds: float) -> None:
        """A producer's wait between sends, in the transport's loop where it has one; if the
        transport fails, counted, and the time waited all the same."""
        try:
            self.loop.idle(seconds)
        except TransportError as exc:
            self.call_failed("idle", exc)
            time.sleep(seconds)

    def sleep_until(self, due: int, while_flag: str = "producing") -> bool:
        """Sleep until due (monotonic ns), handing off intervals on the way; False if told
        to stop first."""
        control = self.control
        while getattr(control, while_flag):
            now = now_ns()
            if now >= due:
                # Woken past a boundary that lies after `due`: the send belongs to the
                # interval of `due` (its intended time), not to the one it woke in.
                return True
            if now >= self.next_boundary:
                self.flush(now)
            self.wait(min(due - now, self.next_boundary - now, MAX_SLEEP_S * 1e9) / 1e9)
        return False

    def pace(self, intended: int, now: int, left: int = MAX_UNSENT) -> tuple[int, int] | None:
        """Wait until the send drawn for `intended` is due: (intended, actual) monotonic ns,
        or None to stop. Unthrottled, the intended time is the actual one."""
        until = self.control.produce_until_ns
        if intended >= until:
            return None
        if intended > now:
            self.flush_sends()
            if not self.sleep_until(intended):
                return None  # stopped at once: nothing was due yet
            now = now_ns()
        elif now >= until:
            self.unsent(intended, until, left)
            return None
        # A sample belongs to the interval of its intended time, so that a producer held up
        # in a send does not carry its samples into the next phase.
        if intended >= self.next_boundary:
            self.flush(intended)
        return intended, now

    def due_sends(self, limit: int) -> Iterator[tuple[int, int, dict[str, str] | None]]:
        """(intended, actual, properties) of each send as it falls due, until the producers
        are told to stop or `limit` sends (0: no limit) were due."""
        property_sets = self.out.property_sets
        turns = len(property_sets)
        control, schedule = self.control, self.schedule
        clock = now_ns
        loop = self.loop
        most_ns = int(MAX_SLEEP_S * 1e9)
        count, stop = 0, limit or -1
        while count != stop:
            if not control.producing:
                return
            if self.pending and not self._apply_pending():
                return
            now = clock()
            intended = now if schedule is None else schedule.next_ns()
            # Due now, in this interval, before the stop: the common case, without a call.
            if not (intended <= now < control.produce_until_ns
                    and intended < self.next_boundary):
                if now < intended < control.produce_until_ns and intended < self.next_boundary:
                    # Ahead of the schedule, due in this interval: pace() and sleep_until()
                    # inline. A paced send runs this after a sleep, with the caches cold,
                    # where each call and attribute costs several times what it does in a loop.
                    try:
                        loop.flush()  # what is queued goes out before the thread sleeps
                        while now < intended:
                            loop.idle(min(intended - now, most_ns) / 1e9)
                            if not control.producing:
                                return  # stopped at once: nothing was due yet
                            now = clock()
                    except TransportError as exc:  # counted; the rest of the wait as pace()'s
                        self.call_failed("flush", exc)
                        if not self.sleep_until(intended):
                            return
                        now = clock()
                else:
                    due = self.pace(intended, now, stop - count if limit else MAX_UNSENT)
                    if due is None:
                        return
                    intended, now = due
            yield intended, now, property_sets[count % turns]
            count += 1

    def unsent(self, first: int, stop: int, most: int = MAX_UNSENT) -> None:
        """The messages due before the stop that a late producer never sent: counted, and
        their delay (for a Requestor also their latency) recorded as at least the time from
        their intended send to the stop, so that a stalled broker cannot look fast."""
        schedule, rec = self.schedule, self.rec
        assert schedule is not None
        stop = min(stop, self.control.produce_until_ns)
        intended, count = first, 0
        most = min(most, MAX_UNSENT)  # never more than the -mg still to send
        while intended < stop and count < most:
            waited = (stop - intended) // 1000
            rec.delay.append(waited)
            if self.role.consumes:
                rec.latency.append(waited)
            count += 1
            intended = schedule.next_ns()
        rec.unsent += count

    def _apply_pending(self) -> bool:
        """Hold while paused, then take up a new rate; False if told to stop meanwhile.

        After a pause or a rate change the schedule starts again from now: the messages not
        sent while paused were never due, so they are not sent in a burst nor counted late.
        """
        self.pending = False
        control = self.control
        resumed = False
        while control.paused:
            now = now_ns()
            if not control.producing or now >= control.produce_until_ns:
                return False
            if now >= self.next_boundary:
                self.flush(now)
            self.hold()
            resumed = True
        self.take_rate(control.rates.get(self.key[0]), resumed)
        return True

    def held(self) -> bool:
        """--backlog: while the consumers are held, hand off empty intervals and keep the
        connection (hold()); False if told to stop meanwhile."""
        control = self.control
        while control.held:
            if not control.consuming:
                return False
            now = now_ns()
            if now >= self.next_boundary:
                self.flush(now)
            self.hold()
        return True

    def hold(self) -> None:
        """A turn of a pause: what is queued goes out, and the thread sleeps a little."""
        self.flush_sends()
        time.sleep(MAX_SLEEP_S)

    def take_rate(self, rate: float | None, resumed: bool) -> None:
        """The schedule again from now, at rate (None: its own), where the rate changed or a
        pause ended."""
        schedule = self.schedule
        if schedule is not None:
            rate = schedule.rate if rate is None else rate
            if rate != schedule.rate or resumed:
                schedule.retarget(now_ns(), rate)
