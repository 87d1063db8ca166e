"""Where cells run: in the controller's own process, or each in a child process.

Both kinds of handle take the same commands and put the cell's reports on the controller's
queue, so the controller does not care where a cell lives.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
from multiprocessing.connection import Connection
from typing import Any

from harness.engine.cell import Cell, CellPlan
from harness.errors import StartFailure
from harness.stats.reports import DoneReport, Report

READY_TIMEOUT_S = 120.0
LIVE_COMMANDS = ("pause", "set_rate", "add_thread", "release")
CHILD_LOOK_S = 2.0


class LocalCell:
    def __init__(self, plan: CellPlan, reports: queue.Queue[Report]) -> None:
        self.plan = plan
        self.cell = Cell(plan, reports.put)

    def launch(self) -> None:
        pass

    def prepare(self) -> None:
        self.cell.prepare()

    def start(self, start_epoch_ns: int) -> None:
        self.cell.start(start_epoch_ns)

    def drain(self, stop_epoch_ns: int) -> None:
        self.cell.drain(stop_epoch_ns)

    def stop(self) -> None:
        self.cell.stop()

    def kill(self) -> None:
        self.cell.stop()

    def command(self, name: str, *args: Any) -> None:
        """A live change: pause, set_rate, add_thread, or release (--backlog)."""
        getattr(self.cell, name)(*args)

    def join(self, timeout: float) -> None:
        self.cell.join(timeout)


def _child_main(plan: CellPlan, conn: Connection) -> None:
    # The controller owns Ctrl-C; children stop when it tells them to, or when it dies.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lock = threading.Lock()
    # The cell's last report wakes this thread, which otherwise sleeps until a command comes:
    # a periodic look is a measuring process's CPU (contrib/bench/RESULTS.md, "Idle looks").
    ended, end = multiprocessing.Pipe(duplex=False)

    def send(report: Report | dict[str, Any]) -> None:
        with lock:
            try:
                conn.send(report)
            except OSError:
                cell.stop()
        if isinstance(report, DoneReport):
            end.send(None)

    cell = Cell(plan, send)
    try:
        cell.prepare()
    except StartFailure as exc:
        send({"type": "error", "message": str(exc)})
        return
    send({"type": "ready"})
    parent = os.getppid()
    started = False
    while True:
        if started and cell.join(0):
            break
        try:
            # A dead controller closes the pipe (EOF); the look at the parent is for a pipe
            # some other process still holds open.
            ready = multiprocessing.connection.wait([conn, ended], CHILD_LOOK_S)
            if ended in ready:
                break
            if not ready:
                if os.getppid() != parent:
                    cell.stop()
                continue
            command, arg = conn.recv()
        except (EOFError, OSError):
            # No more commands can come: stop, and wait for the cell's last report.
            cell.stop()
            break
        if command == "start":
            cell.start(arg)
            started = True
        elif command == "drain":
            cell.drain(arg)
        elif command == "stop":
            cell.stop()
        elif command in LIVE_COMMANDS:
            getattr(cell, command)(*arg)
    cell.join(None)


class ChildCell:
    def __init__(self, plan: CellPlan, reports: queue.Queue[Report]) -> None:
        self.plan = plan
        self.reports = reports
        context = multiprocessing.get_context("spawn")
        self.conn, child_conn = context.Pipe()
        self.process = context.Process(target=_child_main, args=(plan, child_conn),
                                       name=f"harness-cell-{plan.process_index}", daemon=True)
        self._child_conn = child_conn
        self.reader: threading.Thread | None = None

    def launch(self) -> None:
        self.process.start()
        self._child_conn.close()

    def prepare(self) -> None:
        if not self.conn.poll(READY_TIMEOUT_S):
            self.kill()
            raise StartFailure(f"process {self.plan.process_index} did not start in "
                               f"{READY_TIMEOUT_S:g} s")
        try:
            first = self.conn.recv()
        except EOFError:
            raise StartFailure(f"process {self.plan.process_index} died while starting "
                               f"(exit code {self.process.exitcode})") from None
        if first.get("type") == "error":
            raise StartFailure(first["message"])
        self.reader = threading.Thread(target=self._read, daemon=True,
                                       name=f"reader-{self.plan.process_index}")
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                report = self.conn.recv()
            except (EOFError, OSError):
                break
            self.reports.put(report)
            if isinstance(report, DoneReport):
                return
        self.reports.put(DoneReport(self.plan.process_index,
                                    f"process {self.plan.process_index} ended unexpectedly "
                                    f"(exit code {self.process.exitcode})"))

    def _command(self, command: str, arg: Any = None) -> None:
        with contextlib.suppress(OSError):
            self.conn.send((command, arg))

    def start(self, start_epoch_ns: int) -> None:
        self._command("start", start_epoch_ns)

    def drain(self, stop_epoch_ns: int) -> None:
        self._command("drain", stop_epoch_ns)

    def stop(self) -> None:
        self._command("stop")

    def command(self, name: str, *args: Any) -> None:
        self._command(name, args)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()

    def join(self, timeout: float) -> None:
        self.process.join(timeout)
