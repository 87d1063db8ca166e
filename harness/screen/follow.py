"""A run going on in another process as the screen's feed (`harness view --follow`, the pages
of `harness serve`): its intervals read from its files as they are written, on a thread of
their own, and folded into a Board as the live screen folds them; once the run has ended, a
replay standing at its last interval. The keys reach the run through its control socket
when it was started with --control (harness.engine.control)."""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path

from harness.engine.control import ControlClient
from harness.errors import BadInput
from harness.rundir.reader import RecordedRun, event_text
from harness.screen.board import Board
from harness.screen.feed import Feed, Status
from harness.screen.replay import ReplayFeed
from harness.stats.views import IntervalView

AHEAD = 4  # intervals read, not yet shown (each holds its histograms): the reader waits beyond
FOLD_S = 0.1  # at most this long folding a backlog in one refresh
ASK_S = 1.0  # how often a run without a control socket is asked again


class FollowFeed(Feed):
    def __init__(self, run_dir: Path, recorded: RecordedRun) -> None:
        self.run_dir = run_dir
        self.recorded = recorded
        self.run = recorded.run
        self.board = Board(self.run, recorded.metrics)
        self.control = ControlClient(run_dir)
        self.replay = recorded.replay(follow=True)
        self.views: queue.Queue[IntervalView | None] = queue.Queue(AHEAD)
        self.last: IntervalView | None = None
        self.read_all = False
        self.error: BaseException | None = None
        self.after: ReplayFeed | None = None  # the replay, once the run has ended
        self.events_shown = 0
        self.asked = 0.0
        self.listening = False
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._read, name="follow", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for view in self.replay.views():
                if not self._hand(view):
                    return
        except BaseException as exc:  # shown in the log: the file went bad mid-run
            self.error = exc
        self._hand(None)

    def _hand(self, view: IntervalView | None) -> bool:
        """Over to the screen, waiting while it is AHEAD behind; False once it has closed."""
        while not self.closed.is_set():
            try:
                self.views.put(view, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def close(self) -> None:
        """The screen has closed: the reader stops at its next interval."""
        self.closed.set()
        self.control.close()

    @property  # type: ignore[override]
    def live(self) -> bool:
        """The run takes the live keys: going, and listening on its control socket."""
        if self.after is not None:
            return False
        now = time.monotonic()
        if not self.listening and now - self.asked >= ASK_S:
            self.asked = now
            self.listening = self.control.available()
        return self.listening

    def poll(self) -> list[str]:
        if self.after is not None:
            lines = self.after.poll()
            self.board = self.after.board  # stepping back folds the run again, afresh
            return lines
        lines: list[str] = []
        until = time.monotonic() + FOLD_S
        while not self.read_all and time.monotonic() < until:
            try:
                view = self.views.get_nowait()
            except queue.Empty:
                break
            if view is None:
                self.read_all = True
                break
            self.last = view
            lines.extend(self.board.add(view))
        events = self.replay.events
        lines.extend(event_text(e) for e in events[self.events_shown:])
        self.events_shown = len(events)
        if self.read_all:
            if self.error is not None:
                lines.append(f"reading the run stopped: {self.error}")
            lines.append("the run has ended: the keys now step through it as a replay")
            self.control.close()
            self.after = ReplayFeed(self.run_dir, self.recorded, self.board)
        return lines

    def status(self) -> Status:
        if self.after is not None:
            return self.after.status()
        view = self.last
        if view is None:
            return Status("starting", 0.0, self.run.duration or None, position=self._mode())
        elapsed = view.start + view.length
        remaining = max(self.run.duration - elapsed, 0.0) if self.run.duration else None
        return Status(view.phase, elapsed, remaining, position=self._mode())

    def _mode(self) -> str:
        return "following; the keys steer the run" if self.live else \
            "following; the run takes no keys (started without --control)"

    # -- a run going: through its control socket
    def stop(self) -> None:
        self.control.send(do="stop")

    def toggle_pause(self) -> str:
        return self.control.send(do="pause")

    def change_rate(self, group: str, factor: float) -> str:
        return self.control.send(do="rate", group=group, factor=factor)

    def add_thread(self, group: str) -> str:
        return self.control.send(do="thread", group=group)

    # -- once it has ended
    def toggle_play(self) -> None:
        if self.after is not None:
            self.after.toggle_play()

    def step(self, steps: int) -> None:
        if self.after is not None:
            self.after.step(steps)

    def seek(self, where: int) -> None:
        if self.after is not None:
            self.after.seek(where)


def open_feed(run_dir: Path, recorded: RecordedRun, follow: bool) -> Feed:
    """The screen's feed of a run directory: followed while it runs, else replayed."""
    if follow:
        return FollowFeed(run_dir, recorded)
    feed = ReplayFeed(run_dir, recorded)
    if not feed.slots:
        raise BadInput("RUN_DIR", f"{run_dir} holds no intervals")
    return feed
