"""Run directories of another schema: the versions this release wrote before are read, a
record missing a field is bad input named in one line (file, line, field) with exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.rundir.schema import ADDED, READABLE, SCHEMA_VERSION, problem, upgrade
from harness.stats.recorder import COUNTERS


def rewrite(run_dir: Path, change: Any) -> None:
    """Apply change(record) to every record of the run's intervals.jsonl."""
    path = run_dir / "intervals.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(change(r)) + "\n" for r in records))


def as_version_1(record: dict[str, Any]) -> dict[str, Any]:
    """A record as release 1 wrote it: counters records without the counters added since."""
    record["v"] = 1
    if record["type"] == "counters":
        for name in ("foreign", "unsent", "late", "refused", "redelivered", "rebalances",
                     "cpu_us", "connect_failed"):
            record.pop(name, None)
    return record


def test_a_version_1_run_is_read_with_the_counters_it_lacks_as_zero(harness: Any,
                                                                     loopback_run: Any) -> None:
    run_dir = loopback_run.run_dir
    received = loopback_run.summary["groups"]["receiver"]["received"]
    rewrite(run_dir, as_version_1)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "schema": 1}))
    (run_dir / "summary.json").unlink()  # the view recomputes it from the intervals
    shown = harness("view", "--no-ui", str(run_dir))
    assert shown.code == 0, shown.stderr
    assert f"received {received}, missing 0" in shown.stdout
    report = harness("report", str(run_dir))
    assert report.code == 0, report.stderr
    assert "receiver.latency" in (run_dir / "report.html").read_text()


@pytest.mark.parametrize("command", ["view", "report"])
def test_a_record_without_a_required_field_is_named_by_file_line_and_field(
        harness: Any, loopback_run: Any, command: str) -> None:
    run_dir = loopback_run.run_dir
    path = run_dir / "intervals.jsonl"
    lines = path.read_text().splitlines()
    at = next(n for n, line in enumerate(lines) if '"type":"histogram"' in line)
    record = json.loads(lines[at])
    del record["hist"]
    lines[at] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    done = harness(command, *(["--no-ui"] if command == "view" else []), str(run_dir))
    assert done.code == 2
    assert done.stderr.strip().splitlines() == [
        f"harness: error: RUN_DIR: {path}, line {at + 1}: a histogram record without the "
        "field 'hist'"]


def test_a_record_of_a_later_version_is_refused_by_its_version(harness: Any,
                                                               loopback_run: Any) -> None:
    run_dir = loopback_run.run_dir
    rewrite(run_dir, lambda r: {**r, "v": SCHEMA_VERSION + 1})
    done = harness("view", "--no-ui", str(run_dir))
    assert done.code == 2
    assert f"line 1: schema version {SCHEMA_VERSION + 1}; this release reads" in done.stderr
    assert "Traceback" not in done.stderr


def test_each_readable_version_names_what_it_requires() -> None:
    base = {"run": "r", "node": "n", "process": 0, "interval": 0, "start": 1.0,
            "length": 1.0, "group": "g"}
    for version in READABLE:
        complete = {"type": "counters", "v": version, **base,
                    **dict.fromkeys(COUNTERS, 0)}
        assert problem(complete) is None
        for name in ("group", "start"):
            assert problem({k: v for k, v in complete.items() if k != name}) == \
                f"a counters record without the field {name!r}"
    # Each version's additions are required from that version on, filled in before it.
    for added_in, fields in ADDED.items():
        for kind, defaults in fields.items():
            name = next(iter(defaults))
            newer = {"type": kind, "v": added_in, **base, **dict.fromkeys(COUNTERS, 0)}
            del newer[name]
            assert problem(newer) == f"a {kind} record without the field {name!r}"
            older = {**newer, "v": added_in - 1}
            assert problem(older) is None
            assert upgrade(older)[name] == defaults[name]
