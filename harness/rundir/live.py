"""A distributed run's intervals while it goes: the driver writes each interval's reports from
every node, as it merged them for its screen, to live.jsonl in its run directory, in the
records of intervals.jsonl, so that `harness view --follow` and `harness serve` show the run
from its directory (the nodes' own files are merged into intervals.jsonl only at the end).
The file is removed once the run's summary.json is written; a follower that opened it reads
it to its end, then the merged files."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from harness.rundir.sinks import Closed, Sink
from harness.stats.records import closing_records, report_records

LIVE = "live.jsonl"


class LiveIntervals(Sink):
    def __init__(self, run_dir: Path, run_id: str, groups: list[str]) -> None:
        self.path = run_dir / LIVE
        self.run_id = run_id
        self.groups = groups
        self.file = self.path.open("a", encoding="utf-8")
        self.lock = threading.Lock()  # the driver's loop and a live change from the keys

    def _write(self, records: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
        with self.lock:
            if not self.file.closed:
                self.file.write(text)
                self.file.flush()

    def interval(self, closed: Closed) -> None:
        phase = closed.view.phase
        records: list[dict[str, Any]] = []
        for report in closed.reports:
            records += report_records(report, self.run_id, report.node, self.groups,
                                      report.start_ns / 1e9, phase)
        # The host record closes the interval for a reader, after every node's reports.
        records += closing_records(self.run_id, "driver", closed.index, closed.start, phase,
                                   closed.machine_cpu, closed.broker, closed.broker_memory)
        self._write(records)

    def event(self, record: dict[str, Any]) -> None:
        self._write([record])

    def close(self) -> None:
        with self.lock:
            self.file.close()

    def remove(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
