"""What the screen reads from: a run in progress (harness.screen.live) or a finished one replayed
from its files (harness.rundir.reader). Both fold merged intervals into a Board."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from harness.plan.run import RunSpec
from harness.screen.board import Board


@dataclass
class Status:
    phase: str  # starting, warmup, measure, drain, finished (live); the interval's (replay)
    elapsed: float
    remaining: float | None  # None: the run ends by message count or by hand
    paused: bool = False
    finished: bool = False
    position: str = ""  # how the screen has the run, when not live: followed, or replayed where


class Feed(ABC):
    """The screen's source. Live feeds take the run commands, replays the stepping ones;
    each answers the other kind's with a line saying why not."""

    live: bool
    run: RunSpec
    run_dir: Path
    board: Board

    @abstractmethod
    def poll(self) -> list[str]:
        """Fold in what arrived since the last call; returns lines for the log pane."""

    @abstractmethod
    def status(self) -> Status: ...

    def close(self) -> None:
        """The screen showing it has closed."""

    # -- a live run
    def stop(self) -> None:
        pass

    def toggle_pause(self) -> str:
        return "a replay cannot pause producers"

    def change_rate(self, group: str, factor: float) -> str:
        return "a replay cannot change rates"

    def add_thread(self, group: str) -> str:
        return "a replay cannot add threads"

    # -- a replay
    def toggle_play(self) -> None:
        pass

    def step(self, steps: int) -> None:
        pass

    def seek(self, where: int) -> None:
        pass


def describe_target(run: RunSpec) -> str:
    """Transports and brokers, as the header shows them: stomp activemq@127.0.0.1:61613."""
    from harness.modules import transport_class

    seen: list[str] = []
    for group in run.groups:
        text = transport_class(group.transport).endpoint(group.settings(run.node, 0, 0))
        if text not in seen:
            seen.append(text)
    return ", ".join(seen)
