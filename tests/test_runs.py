"""`harness runs`: past runs listed from their manifests and summaries, newest first,
filtered by name, module, start and label, as a table, JSON lines or CSV."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

from harness.units import format_us
from tests.conftest import env, harness_command


def runs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(harness_command("runs", *args), capture_output=True, text=True,
                          timeout=60, env=env())


def test_runs_are_listed_newest_first_filtered_and_as_scripts_read_them(harness,
                                                                         tmp_path: Path):
    tree = tmp_path / "tree"
    made = []
    for out, args in (("a", ["-m", "loopback.Sender", "-d", "Q", "--label", "env=ci",
                             "--label", "build=7", "-g", "-m loopback.Receiver -d Q"]),
                      ("a", ["-m", "loopback.Sender", "-d", "Q", "-rt", "200", "--label",
                             "env=lab", "-g", "-m loopback.Receiver -d Q"]),
                      ("b/deep", ["-m", "loopback.Publisher", "-d", "T", "-n", "nightly",
                                  "--slo", "lost == 0", "-g", "-m loopback.Subscriber -d T"])):
        done = harness("run", *args, "-rt", "100", "-rl", "1", "-ss", "1", "--no-ui", "-o",
                       str(tree / out), output=False)
        assert done.code == 0, done.stderr
        made.append(max((tree / out).iterdir(), key=lambda p: p.stat().st_mtime))
        time.sleep(1.1)  # starts a second apart: the order is the starts'
    # Not a run: a directory of notes beside them is passed over.
    (tree / "notes").mkdir()
    (tree / "notes" / "readme.txt").write_text("not a run")

    listed = runs(str(tree), "-f", "json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [Path(r["path"]) for r in rows] == made[::-1]
    for row, run_dir in zip(rows, made[::-1], strict=True):
        summary = json.loads((run_dir / "summary.json").read_text())
        producers = [g for g in summary["groups"].values() if g["sent"]]
        assert row["rate"] == sum(g["rate"] for g in producers)
        consumer = next(g for g in summary["groups"].values() if g["received"])
        assert row["p99_us"] == consumer["latency"]["p99"]
        assert row["lost"] == 0 and row["status"] == "complete"
    assert rows[0]["name"] == "nightly" and rows[0]["slo"] is True
    assert rows[0]["modules"] == ["loopback.Publisher", "loopback.Subscriber"]
    assert rows[2]["labels"] == {"env": "ci", "build": "7"} and rows[1]["slo"] is None

    def paths(*filters: str) -> list[Path]:
        done = runs(str(tree), "-f", "json", *filters)
        assert done.returncode == 0, done.stderr
        return [Path(json.loads(line)["path"]) for line in done.stdout.splitlines()]

    assert paths("--label", "env=ci") == [made[0]]
    assert paths("--label", "build=7", "--label", "env=lab") == []
    assert paths("--module", "Subscriber") == [made[2]]
    assert paths("--name", "run") == [made[1], made[0]]
    assert paths("--last", "1") == [made[2]]
    assert paths("--since", "1h") == made[::-1]
    assert paths("--since", "2099-01-01") == []

    table = runs(str(tree), "-f", "csv")
    parsed = list(csv.DictReader(io.StringIO(table.stdout)))
    assert [Path(r["path"]) for r in parsed] == made[::-1]
    assert parsed[0]["slo"] == "true" and parsed[2]["labels"] == "env=ci build=7"
    shown = runs(str(tree))
    assert "3 run(s)" in shown.stdout and "nightly" in shown.stdout

    # harness compare takes the newest runs that pass the same filters, oldest first.
    page = tmp_path / "compare.html"
    compared = subprocess.run(harness_command(
        "compare", "--last", "2", "--runs-dir", str(tree), "--name", "run", "-o", str(page)),
        capture_output=True, text=True, timeout=120, env=env())
    assert compared.returncode == 0, compared.stderr
    assert [line.split(":")[0].strip() for line in compared.stdout.splitlines()[:2]] == \
        [made[0].name, made[1].name]
    assert page.stat().st_size > 1000
    alone = subprocess.run(harness_command(
        "compare", "--last", "2", "--runs-dir", str(tree), "--module", "Subscriber"),
        capture_output=True, text=True, timeout=120, env=env())
    assert alone.returncode == 2 and "1 run(s)" in alone.stderr, alone.stderr

    # A trend: p99 against the start, a line a run name, oldest first in its table.
    page = tmp_path / "trend.html"
    drawn = runs(str(tree), "--trend", "p99", "-o", str(page))
    assert drawn.returncode == 0 and "p99 of 3 run(s)" in drawn.stdout, drawn.stderr
    text = page.read_text()
    assert text.count("<polyline") == 2 and ">nightly</text>" in text and ">run</text>" in text
    cells = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>[^<]*</td><td>[^<]*</td>"
                       r"<td>([^<]*)</td><td>([^<]*)</td></tr>", text)
    assert [Path(c[3]) for c in cells] == made
    assert [c[1] for c in cells] == ["run", "run", "nightly"]
    assert [c[2] for c in cells] == [format_us(r["p99_us"]) for r in rows[::-1]]

    # A run directory cut off (its summary never written) is still listed, with what it has.
    shutil.copytree(made[0], tree / "cut")
    (tree / "cut" / "summary.json").write_text('{"groups": {"sender": {"rate"')
    assert tree / "cut" in paths()


def test_bad_runs_input_is_one_line(tmp_path: Path):
    for args, flag in ((["--format", "xml"], "--format"), (["--since", "soon"], "--since"),
                       (["--label", "novalue"], "--label"), (["--last", "0"], "--last"),
                       (["--trend", "p42"], "--trend"), (["-o", "t.html"], "--output"),
                       (["--trend", "rate", "-f", "csv"], "--format")):
        done = runs(str(tmp_path), *args)
        assert done.returncode == 2 and done.stderr.startswith(f"harness: error: {flag}: "), \
            done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    missing = runs(str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "is not a directory" in missing.stderr


def test_view_follow_shows_a_run_of_another_process_as_it_goes_then_its_summary(
        tmp_path: Path):
    """`harness view --follow` (the newest run under runs/) prints each interval while the
    run, started in another process, is still going, and ends with the summary that
    `harness view` prints of the finished run."""
    run = subprocess.Popen(harness_command(
        "run", "-m", "loopback.Sender", "-d", "Q", "-rt", "100", "-rl", "6", "-ss", "1",
        "--no-ui", "-g", "-m loopback.Receiver -d Q"), cwd=tmp_path, env=env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "runs").is_dir() or not any((tmp_path / "runs").iterdir()):
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.1)
    follow = subprocess.Popen(harness_command("view", "--follow"), cwd=tmp_path, env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert follow.stdout is not None
    first = follow.stdout.readline()
    assert "sender" in first and "sent" in first, first
    assert run.poll() is None, "the first interval came only after the run ended"
    rest = follow.stdout.read()  # to its end: the run's end, then the summary
    assert follow.wait(timeout=60) == 0, follow.stderr.read() if follow.stderr else ""
    assert run.wait(timeout=30) == 0, run.stderr.read() if run.stderr else ""
    (run_dir,) = (tmp_path / "runs").iterdir()
    viewed = subprocess.run(harness_command("view", "--no-ui", str(run_dir)), cwd=tmp_path,
                            env=env(), capture_output=True, text=True, timeout=60)
    # The same interval lines and summary (less where the run directory is said to be).
    strip = [line for line in (first + rest).splitlines() if not line.startswith("run dir")]
    assert strip == [line for line in viewed.stdout.splitlines()
                     if not line.startswith("run dir")]
    assert "Summary:" in rest


def test_a_trend_page_draws_each_run_names_line_in_chromium(tmp_path: Path):
    """Nine nightly runs and three others, each a manifest and a summary as a run writes them
    (the index reads nothing else): the trend of p99 draws a line a name in a real browser,
    without a script error, and tables the points oldest first."""
    from tests.browser import chart_pixels, chromium

    day = 86400.0
    for i in range(12):
        name = "nightly" if i < 9 else "soak"
        run_dir = tmp_path / "tree" / f"run-{i:02d}"
        run_dir.mkdir(parents=True)
        (run_dir / "manifest.json").write_text(json.dumps({
            "run_id": f"r{i}", "name": name, "start": 1_790_000_000 + i * day,
            "status": "complete", "options": {"groups": [{"module": "kafka.Sender"}]}}))
        (run_dir / "summary.json").write_text(json.dumps({"groups": {
            "sender": {"module": "kafka.Sender", "sent": 1000, "rate": 100.0, "lost": 0},
            "receiver": {"module": "kafka.Receiver", "sent": 0, "lost": 0,
                         "latency": {"p99": 1000.0 * (i + 1)}}}}))
    page = tmp_path / "trend.html"
    done = runs(str(tmp_path / "tree"), "--trend", "p99", "-o", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert text.count("<polyline") == 2 and text.count("<tr><td>") == 12
    assert text.index("run-00") < text.index("run-08") < text.index("run-11")
    assert chromium(page, tmp_path / "trend.png", height=900) == []
    assert chart_pixels(tmp_path / "trend.png", colours=2) > 500
