"""Distributed runs stopped, steered and losing a node, on real Spark executors
(`local-cluster[2,1,1024]`): Ctrl-C once and twice, an executor killed, a node cut off from
the driver, the live screen's q, a run followed from its directory and steered by its
socket. (tests/test_distributed.py runs them whole; a file of their own lets the suite's
paired part share them out.)"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.conftest import command_line, env, free_port, harness_command, read_jsonl
from tests.test_distributed import CLUSTER, MASTER, node_dirs


def interrupted_run(tmp_path: Path, output: str, *flags: str) -> subprocess.Popen:
    """A run on two nodes, once both have shown two intervals."""
    proc = subprocess.Popen(harness_command(
        "run", "-m", "loopback.Sender", "-d", "Q", "-rt", "500", "-g",
        "-m loopback.Receiver -d Q", "-ss", "1", *CLUSTER, "-o", output, *flags),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:  # two intervals from both nodes, then Ctrl-C
        seen += "node " in line and "sender" in line
        if seen >= 4:
            break
    return proc


def test_ctrl_c_on_the_driver_stops_every_node_gracefully_and_merges(harness, tmp_path):
    """The output is a Hadoop file system's URI: the nodes' files travel back with the tasks'
    results and the merged run is copied there whole."""
    out = tmp_path / "runs"
    proc = interrupted_run(tmp_path, f"file://{out}")
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    (run_dir,) = out.iterdir()
    assert f"run directory: file://{out}/{run_dir.name}" in rest
    for node in node_dirs(run_dir):
        manifest = json.loads((node / "manifest.json").read_text())
        assert manifest["status"] == "complete" and manifest["stopped_by"] == "interrupt"
        rows = read_jsonl(node / "intervals.jsonl")
        assert any(r["phase"] == "drain" for r in rows)
    summary = json.loads((run_dir / "summary.json").read_text())
    groups = summary["groups"]
    assert groups["receiver"]["received"] == groups["sender"]["sent"] > 0
    assert "Summary" in rest
    assert not list(Path(tempfile.gettempdir()).glob(f"harness-run-*/*{run_dir.name[16:]}"))
    shown = harness("view", str(run_dir), "--no-ui", output=False)
    assert shown.code == 0, shown.stderr
    assert f"expected {groups['sender']['sent']}, received" in shown.stdout


def test_a_second_ctrl_c_cancels_the_spark_job_and_what_was_written_still_parses(tmp_path):
    out = tmp_path / "runs"
    # A broker slower than the senders: the first Ctrl-C leaves a backlog of over a thousand
    # messages to drain at 100/s, and the second comes while the nodes drain it.
    proc = interrupted_run(tmp_path, str(out), "--drain", "60", "--loopback-capacity", "100")
    proc.send_signal(signal.SIGINT)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "cancelling the Spark job" in err
    (run_dir,) = out.iterdir()
    nodes = node_dirs(run_dir)
    assert len(nodes) == 2
    for node in nodes:
        json.loads((node / "manifest.json").read_text())
        assert read_jsonl(node / "intervals.jsonl")  # whole lines only
    # Merged all the same, and the backlog was left where the drain was cut short.
    groups = json.loads((run_dir / "summary.json").read_text())["groups"]
    assert 0 < groups["receiver"]["received"] < groups["sender"]["sent"]


def test_an_executor_killed_mid_run_is_reported_and_the_other_node_stops_gracefully(tmp_path):
    import psutil

    out = tmp_path / "runs"
    proc = subprocess.Popen(harness_command(
        "run", "-m", "loopback.Sender", "-d", "Q", "-rt", "500", "-g",
        "-m loopback.Receiver -d Q", "-ss", "1", "-rl", "60", *CLUSTER, "-o", str(out)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        seen += "node " in line and "sender" in line
        if seen >= 4:
            break
    executors = [p for p in psutil.Process(proc.pid).children(recursive=True)
                 if "CoarseGrainedExecutorBackend" in command_line(p)]
    assert len(executors) == 2
    executors[0].kill()
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    lost = [line for line in err.splitlines() if "lost" in line and "node " in line]
    assert len(lost) == 1 and "s into the run" in lost[0]
    (run_dir,) = out.iterdir()
    manifests = [json.loads((n / "manifest.json").read_text()) for n in node_dirs(run_dir)]
    assert sorted(m["status"] for m in manifests) == ["complete", "running"]
    for node in node_dirs(run_dir):
        read_jsonl(node / "intervals.jsonl")  # whole lines only, even the lost node's
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] is False and len(summary["nodes_lost"]) == 1
    assert "Summary" in rest


def test_a_node_cut_off_from_the_driver_is_lost_in_bounded_time_and_the_other_goes_on(
        tmp_path):
    """A node's link to the driver silenced mid-run (a proxy that moves no byte and closes
    nothing, as across a partition: these executors cannot be put in a network namespace):
    the driver counts the node lost within its silence limit, keeps what the node sent
    before, and the other node runs to the end of the run."""
    from tests.cutter import Cutter

    listen = free_port()
    proxy = Cutter(("127.0.0.1", listen), record=True)
    out = tmp_path / "runs"
    began = time.monotonic()
    try:
        proc = subprocess.Popen(harness_command(
            "run", "-m", "loopback.Sender", "-d", "Q", "-rt", "200", "-g",
            "-m loopback.Receiver -d Q", "-ss", "1", "-rl", "24", "--driver-port", str(listen),
            "--driver-host", f"127.0.0.1:{proxy.port}", *CLUSTER, "-o", str(out)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
        # Held once the first node to connect has reported its fourth interval.
        while not any(number == 1 and upstream and b'"kind":"interval","index":3' in data
                      for number, upstream, data in list(proxy.log or [])):
            assert proc.poll() is None and time.monotonic() - began < 240
            time.sleep(0.1)
        proxy.hold(1)
        held = time.monotonic()
        rest, err = proc.communicate(timeout=180)
    finally:
        proxy.close()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    (lost,) = [line for line in err.splitlines() if "lost" in line and "node " in line]
    assert "nothing from it for" in lost and "the other nodes go on" in lost, lost
    # Found within the silence limit (10 s) and a little, of the run's clock; the run then
    # went on to its end (24 s and the drain), not stopped with the lost node.
    found = float(re.search(r"lost ([\d.]+) s into the run", lost)[1])
    assert 4 <= found <= 4 + 10 + 4, lost
    assert time.monotonic() - held < 24 + 10 + 60
    (run_dir,) = out.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] is False and len(summary["nodes_lost"]) == 1
    (gone,) = summary["nodes_lost"]
    rows = [r for r in read_jsonl(run_dir / "intervals.jsonl") if r["type"] == "counters"]
    last = {node: max(r["interval"] for r in rows if r["node"] == node)
            for node in {r["node"] for r in rows}}
    assert len(last) == 2, last
    # The lost node's intervals until the silence are kept; the other's run to the end.
    # Held once the proxy had read the fourth interval's report, which it may not yet have
    # passed on (the third, index 2, was the last to reach the driver once here).
    assert 2 <= last[gone] < found + 2, last
    assert max(v for k, v in last.items() if k != gone) >= 23, last
    assert "Summary" in rest


def test_the_live_screen_shows_a_row_per_node_and_q_stops_every_node(tmp_path):
    """The screen on a distributed run: its node rows hold what the nodes reported, + raises
    the rate on every node, q stops them all gracefully."""
    import asyncio

    from textual.widgets import DataTable

    from harness.distributed.cluster import ClusterSpec
    from harness.distributed.driver import DistributedRun
    from harness.plan.group import GroupSpec
    from harness.plan.run import RunSpec, validate_run
    from harness.screen.app import RunApp
    from harness.screen.live import LiveFeed

    run = RunSpec(groups=[GroupSpec("loopback.Sender", "Q", thread_rate=200),
                          GroupSpec("loopback.Receiver", "Q")],
                  interval=1.0, drain=2.0, output=str(tmp_path / "runs"), name="screen")
    validate_run(run)
    views = []
    driver = DistributedRun(run, ClusterSpec(MASTER, 2), views.append, print,
                            say=lambda line: None)
    feed = LiveFeed(driver)
    feed.on_interval = lambda view: (views.append(view), feed.views.append(view))
    driver.on_interval = feed.on_interval
    driver.prepare()
    feed.start()
    app = RunApp(feed)
    rows: dict[str, list[str]] = {}
    seen: list = []

    async def main() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            deadline = time.monotonic() + 30
            while len(feed.board.nodes) < 2 or feed.board.intervals < 2:
                assert time.monotonic() < deadline, "no intervals from the nodes"
                await pilot.pause(0.2)
            await pilot.press("plus")
            while feed.board.intervals < 5:
                assert time.monotonic() < deadline, "the intervals stopped"
                await pilot.pause(0.2)
            await pilot.pause(0.5)  # one refresh after the last interval was folded in
            seen.append(views[feed.board.intervals - 1])
            table = app.query_one("#nodes", DataTable)
            for key in table.rows:
                rows[str(key.value)] = [str(cell) for cell in table.get_row(key)]
            await pilot.press("q")
            while app.return_code is None and time.monotonic() < deadline + 60:
                await pilot.pause(0.2)

    asyncio.run(main())
    result = feed.outcome()
    assert result.exit_code == 0
    (last,) = seen
    assert sorted(rows) == sorted(last.nodes) and len(rows) == 2
    for name, part in last.nodes.items():
        assert rows[name][:3] == [name, *(f"{part.counts[g] / last.length:,.1f}"
                                          for g in ("sender", "receiver"))]
    for node in node_dirs(result.run_dir):
        manifest = json.loads((node / "manifest.json").read_text())
        assert manifest["status"] == "complete" and manifest["stopped_by"] == "interrupt"
        sent = [r["sent"] for r in read_jsonl(node / "intervals.jsonl")
                if r["type"] == "counters" and r["group"] == "sender" and r["length"] == 1.0]
        # + raised every node's rate by a tenth: 200 -> 220 a second.
        assert sent[0] == 200 and 220 in sent[2:]


def test_a_distributed_run_is_followed_from_its_directory_and_steered_by_its_socket(tmp_path):
    """A two-node run started with --control: `harness view --follow` of the driver's run
    directory prints its merged intervals while it goes (from live.jsonl, which the driver
    writes until its summary), a rate change through the control socket reaches every node,
    the stop through it ends the run with both nodes drained and merged, and the follower
    ends with the merged run's summary; live.jsonl is gone."""
    from harness.engine.control import ControlClient

    out = tmp_path / "runs"
    proc = subprocess.Popen(harness_command(
        "run", "-m", "loopback.Sender", "-d", "Q", "-rt", "200", "-g",
        "-m loopback.Receiver -d Q", "-ss", "1", "-rl", "120", *CLUSTER, "-o", str(out),
        "--control"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
        cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("*/live.jsonl")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        (run_dir,) = out.iterdir()
        follow = subprocess.Popen(harness_command("view", "--follow", "--no-ui", str(run_dir)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env(), cwd=tmp_path)
        assert follow.stdout is not None
        first = follow.stdout.readline()
        assert "sender" in first and proc.poll() is None, first
        control = ControlClient(run_dir)
        time.sleep(2)
        said = control.send(do="rate", group="sender", factor=1.1)
        assert said == "sender: rate 220.0/s per thread on every node, 440.0/s for the group"
        time.sleep(3)
        assert control.send(do="stop").startswith("stopping")
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        followed, follow_err = follow.communicate(timeout=60)
        assert follow.returncode == 0, follow_err
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (run_dir / "live.jsonl").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "control"
    assert f"expected {summary['groups']['sender']['sent']}, received" in followed
    for node in node_dirs(run_dir):
        sent = [r["sent"] for r in read_jsonl(node / "intervals.jsonl")
                if r["type"] == "counters" and r["group"] == "sender" and r["length"] == 1.0]
        assert sent[0] == 200 and 220 in sent[2:], sent
