"""The summary a run prints: a table that fits the screen it is printed on, its columns
explained under it, each producer's rate beside the rate it was asked for."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from rich.console import Console

from harness.screen.console import print_summary
from tests.conftest import env, harness_command
from tests.test_ledger import planted_summary


def printed(summary: dict, width: int) -> str:
    console = Console(record=True, width=width)
    print_summary(console, summary, "RUN")
    return console.export_text()


def test_a_group_short_of_its_target_is_flagged_beside_the_rate_asked():
    """Planted: asked 200 a second, the broker took 150 of the 200 sent in one measured
    second: the target column says 200, the rate is marked, and a line says how far short."""
    summary = planted_summary({"module": "mqtt.Publisher", "destination": "T",
                               "thread-rate": 200.0},
                              [("measure", {"sent": 200, "in_doubt": 50, "untaken": 50})])
    assert summary["groups"]["sender"]["target"] == 200.0
    text = printed(summary, 200)
    header = next(line for line in text.splitlines() if "target" in line and "group" in line)
    row = next(line for line in text.splitlines() if line.startswith("│ sender"))
    cells = dict(zip([c.strip() for c in header.split("┃")[1:-1]],
                     [c.strip() for c in row.split("│")[1:-1]], strict=True))
    assert cells["rate/s"] == "150.0!" and cells["target"] == "200", cells
    assert "sender: 150.0 msg/s is 75% of the 200/s asked" in text
    # Asked nothing (as fast as it can), or reaching its target: no column, no line.
    unpaced = planted_summary({"module": "mqtt.Publisher", "destination": "T"},
                              [("measure", {"sent": 200})])
    assert "┃ target ┃" not in printed(unpaced, 200)
    met = planted_summary({"module": "mqtt.Publisher", "destination": "T",
                           "thread-rate": 200.0}, [("measure", {"sent": 199})])
    shown = printed(met, 200)
    assert "199.0!" not in shown and "199.0 │" in shown and "of the 200/s asked" not in shown


def test_a_runs_summary_fits_a_100_column_screen_and_names_what_it_left_out(tmp_path: Path):
    """A real run on the loopback broker, its output read at COLUMNS=100 as a CI log or a
    small terminal shows it: no line of the table is wider, the rate and the headline
    percentiles are there, the columns left out are named, and the legend says what the
    columns mean. At 250 columns, every column."""
    widths = {}
    for columns in (100, 250):
        done = subprocess.run(
            harness_command("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "300", "-rl",
                            "1", "-sw", "0", "--no-ui", "-o", str(tmp_path / str(columns)),
                            "-g", "-m loopback.Receiver -d Q"),
            capture_output=True, text=True, timeout=60, env={**env(), "COLUMNS": str(columns)})
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
        bottom = next(i for i, line in enumerate(lines) if line.startswith("└"))
        table = lines[top:bottom + 1]
        widths[columns] = max(len(line) for line in table)
        header = table[1]
        assert all(name in header for name in ("rate/s", "target", "p50", "p99", "max"))
        assert "rate/s: messages a second over the measured span" in done.stdout
        assert "measures.md" in done.stdout
        (run,) = (tmp_path / str(columns)).iterdir()
        rate = json.loads((run / "summary.json").read_text())["groups"]["sender"]["rate"]
        assert f" {rate:.1f} " in table[3], table[3]
        if columns == 100:
            assert "p99.9" not in header and "msg/s/core" not in header
            assert "a wider screen shows count, dup, reord, p90, p99.9" in done.stdout
        else:
            assert "p99.9" in header and "msg/s/core" in header
            assert "a wider screen shows" not in done.stdout
    assert widths[100] <= 100 < widths[250], widths
