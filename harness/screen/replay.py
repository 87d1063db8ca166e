"""A finished run as the screen's feed (`harness view`): steps through its recorded
intervals, folding each into a Board exactly as the live run did."""

from __future__ import annotations

from pathlib import Path

from harness.rundir.reader import RecordedRun
from harness.screen.board import Board
from harness.screen.feed import Feed, Status


class ReplayFeed(Feed):
    """Steps through a recorded run, one interval per screen refresh while playing."""

    live = False

    def __init__(self, run_dir: Path, recorded: RecordedRun) -> None:
        self.run_dir = run_dir
        self.recorded = recorded
        self.run = recorded.run
        self.position = 0  # intervals shown
        self.playing = True
        self.board = Board(self.run, recorded.metrics)
        self.pending: list[str] = []
        if recorded.skipped:
            self.pending.append(f"{recorded.skipped} lines of intervals.jsonl did not parse "
                                "(the run was cut off mid-write) and are left out")

    def _rebuild(self, position: int) -> None:
        position = min(max(position, 0), len(self.recorded.views))
        if position < self.position:
            self.board = Board(self.run, self.recorded.metrics)
            self.position = 0
        while self.position < position:
            view = self.recorded.views[self.position]
            self.pending.extend(self.board.add(view))
            self.pending.extend(text for at, text in self.recorded.events if at == view.index)
            self.position += 1

    def poll(self) -> list[str]:
        if self.playing:
            self._rebuild(self.position + 1)
            if self.position >= len(self.recorded.views):
                self.playing = False
        lines, self.pending = self.pending, []
        return lines

    def status(self) -> Status:
        views = self.recorded.views
        end = views[-1].start + views[-1].length if views else 0.0
        shown = views[self.position - 1] if self.position else None
        elapsed = shown.start + shown.length if shown else 0.0
        state = "playing" if self.playing else "stopped"
        return Status(shown.phase if shown else "starting", elapsed, end - elapsed,
                      position=f"{self.position}/{len(views)} intervals, {state}")

    def toggle_play(self) -> None:
        if not self.playing and self.position >= len(self.recorded.views):
            self._rebuild(0)
        self.playing = not self.playing

    def step(self, steps: int) -> None:
        self.playing = False
        self._rebuild(self.position + steps)

    def seek(self, where: int) -> None:
        self.playing = False
        self._rebuild(0 if where == 0 else len(self.recorded.views))
