"""A finished run as the screen's feed (`harness view`): steps through its recorded
intervals, folding each into a Board exactly as the live run did.

The intervals are read from the file as the replay reaches them, never all held: a first
pass over the counters alone lists where each interval lies, and stepping back folds the
run again from its start."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.rundir.reader import RecordedRun, event_text
from harness.screen.board import Board
from harness.screen.feed import Feed, Status
from harness.stats.views import IntervalView


@dataclass(frozen=True)
class Slot:
    """Where one interval of the run lies."""

    index: int
    start: float
    length: float
    phase: str


class ReplayFeed(Feed):
    """Steps through a recorded run, one interval per screen refresh while playing."""

    live = False

    def __init__(self, run_dir: Path, recorded: RecordedRun, board: Board | None = None) -> None:
        """With board, the whole run already folded into it (a followed run that ended): the
        replay stands at its last interval."""
        self.run_dir = run_dir
        self.recorded = recorded
        self.run = recorded.run
        outline = recorded.replay(histograms=False)
        self.slots = [Slot(v.index, v.start, v.length, v.phase) for v in outline.views()]
        self.events: dict[int, list[str]] = {}
        for record in outline.events:
            at = int(record["time"] // self.run.interval)
            self.events.setdefault(at, []).append(event_text(record))
        self.position = 0  # intervals shown
        self.playing = True
        self.pending: list[str] = []
        if outline.skipped:
            self.pending.append(f"{outline.skipped} lines of intervals.jsonl did not parse "
                                "(the run was cut off mid-write) and are left out")
        self._restart()
        if board is not None:
            self.board, self.position, self.playing = board, len(self.slots), False
            self.views = iter(())

    def _restart(self) -> None:
        self.board = Board(self.run, self.recorded.metrics)
        self.position = 0
        self.views: Iterator[IntervalView] = self.recorded.replay().views()

    def _rebuild(self, position: int) -> None:
        position = min(max(position, 0), len(self.slots))
        if position < self.position:
            self._restart()
        while self.position < position:
            view = next(self.views)
            self.pending.extend(self.board.add(view))
            self.pending.extend(self.events.get(view.index, ()))
            self.position += 1

    def poll(self) -> list[str]:
        if self.playing:
            self._rebuild(self.position + 1)
            if self.position >= len(self.slots):
                self.playing = False
        lines, self.pending = self.pending, []
        return lines

    def status(self) -> Status:
        slots = self.slots
        end = slots[-1].start + slots[-1].length if slots else 0.0
        shown = slots[self.position - 1] if self.position else None
        elapsed = shown.start + shown.length if shown else 0.0
        state = "playing" if self.playing else "stopped"
        return Status(shown.phase if shown else "starting", elapsed, end - elapsed,
                      position=f"replay {self.position}/{len(slots)} intervals, {state}")

    def toggle_play(self) -> None:
        if not self.playing and self.position >= len(self.slots):
            self._rebuild(0)
        self.playing = not self.playing

    def step(self, steps: int) -> None:
        self.playing = False
        self._rebuild(self.position + steps)

    def seek(self, where: int) -> None:
        self.playing = False
        self._rebuild(0 if where == 0 else len(self.slots))
