"""A run in progress as the screen's feed: the controller runs on a thread of its own and
hands merged intervals and log lines over through queues, which the screen drains when it
refreshes."""

from __future__ import annotations

import threading
import time
from collections import deque

from harness.engine.runner import LiveControls, RunResult
from harness.screen.board import Board
from harness.screen.feed import Feed, Status
from harness.stats.views import IntervalView


class LiveFeed(Feed):
    live = True

    def __init__(self, controller: LiveControls) -> None:
        self.controller = controller
        self.run = controller.run
        self.run_dir = controller.run_dir
        self.board = Board(self.run, controller.metrics)
        self.views: deque[IntervalView] = deque()
        self.logs: deque[str] = deque()
        self.messages: list[str] = []  # the controller's log, printed again after the screen
        self.result: RunResult | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="controller", daemon=True)
        self.names = {g.name: i for i, g in enumerate(self.run.groups)}
        controller.on_interval, controller.on_log = self.on_interval, self.on_log

    # the controller's callbacks, on its thread
    def on_interval(self, view: IntervalView) -> None:
        self.views.append(view)

    def on_log(self, message: str) -> None:
        self.messages.append(message)
        self.logs.append(message)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.controller.measure()
        except BaseException as exc:  # handed to the main thread once the screen closes
            self.error = exc

    # -- Feed
    def poll(self) -> list[str]:
        lines: list[str] = []
        while self.logs:
            lines.append(self.logs.popleft())
        while self.views:
            lines.extend(self.board.add(self.views.popleft()))
        return lines

    def status(self) -> Status:
        c = self.controller
        finished = not self.thread.is_alive() and (self.result is not None or
                                                   self.error is not None)
        if c.start_s is None:
            return Status("starting", 0.0, self.run.duration or None)
        elapsed = max(time.time() - c.start_s, 0.0)
        if c.stop_at is not None:
            phase = "drain"
        elif elapsed < self.run.warmup:
            phase = "warmup"
        else:
            phase = "measure"
        remaining = max(self.run.duration - elapsed, 0.0) if self.run.duration else None
        return Status(phase, elapsed, remaining, paused=c.paused, finished=finished)

    def stop(self) -> None:
        self.controller.request_stop()

    def toggle_pause(self) -> str:
        return self.controller.toggle_pause()

    def change_rate(self, group: str, factor: float) -> str:
        return self.controller.change_rate(self.names[group], factor)

    def add_thread(self, group: str) -> str:
        return self.controller.add_thread(self.names[group])

    def outcome(self) -> RunResult:
        """The run's result, once the controller thread has ended."""
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result
