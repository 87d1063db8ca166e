"""The harness's own floor: the latency of a paced wake-up and a hand-off between two threads
of a measuring process, taken all through the run under that process's real load.

A message's latency includes the moment its receiving thread waits for the interpreter lock
and the scheduler; under a busy process that wait alone can be milliseconds. Two idle probe
threads hand a timestamp over through the same Inbox the transports use, ten times a
second, and record how long it took: a latency below this floor cannot be told from the
harness's own delay. The probe costs two wake-ups every 100 ms, and a wake-up is dear on a
virtual machine: at twenty hand-offs a second the probe cost an idle process 4 ms of CPU a
second, a microsecond a message at 4,000 msg/s.
"""

from __future__ import annotations

import threading
import time
from array import array

from harness.clock import now_ns
from harness.modules.kit.inbox import Inbox
from harness.stats.histogram import encode, fold, new_histogram

PERIOD_S = 0.1


class FloorProbe:
    def __init__(self) -> None:
        self.inbox: Inbox[int] = Inbox()
        self.values = array("q")
        self.running = True
        self.threads = [threading.Thread(target=self._send, name="floor-send", daemon=True),
                        threading.Thread(target=self._receive, name="floor-receive",
                                         daemon=True)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _send(self) -> None:
        # Paced as a producer is: sleep until a due time, then hand over the due time, so
        # that the floor holds the oversleep a paced send pays as well as the hand-off.
        due, period = now_ns(), int(PERIOD_S * 1e9)
        while self.running:
            due += period
            wait = due - now_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
            else:
                due = now_ns()  # fell behind (a stalled process): no burst to catch up
            self.inbox.put(due)

    def _receive(self) -> None:
        values, get = self.values, self.inbox.get
        while self.running:
            sent = get(0.1)
            if sent is not None:
                values.append((now_ns() - sent) // 1000)

    def stop(self) -> str:
        """Stop, and the hand-off times in microseconds as an encoded histogram."""
        self.running = False
        histogram = new_histogram()
        # A copy: the receiving thread may still append one last value, and an array cannot
        # grow while NumPy reads its buffer.
        fold(histogram, self.values[:])
        return encode(histogram)
