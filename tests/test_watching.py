"""Watching a run from elsewhere: `harness view --follow` on the screen, the control socket a run
started with --control listens on, `harness runs --ui`, and `harness serve`'s page in headless
Chromium (keys pressed in the page steer the run; a token guards another address)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import env, free_port, harness_command

LOOPBACK = ["-m", "loopback.Sender", "-d", "Q", "-rt", "100", "-ss", "1", "--no-ui",
            "-g", "-m loopback.Receiver -d Q"]


@contextmanager
def background(*args: str, cwd: Path, extra_env: dict[str, str] | None = None
               ) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(harness_command(*args), cwd=cwd, env={**env(), **(extra_env or {})},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()


def started(root: Path, process: subprocess.Popen[str], seconds: float = 30) -> Path:
    """The run directory of a run going, once its first interval is written."""
    deadline = time.monotonic() + seconds
    while True:
        found = [d for d in root.glob("*/") if not (d / "summary.json").exists() and
                 (d / "intervals.jsonl").is_file() and
                 b'"type":"host"' in (d / "intervals.jsonl").read_bytes()]
        if found:
            return found[0]
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no interval written"
        time.sleep(0.1)


def events(run_dir: Path) -> list[dict]:
    lines = (run_dir / "intervals.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == "event"]


def sent_per_interval(run_dir: Path) -> list[int]:
    lines = (run_dir / "intervals.jsonl").read_text().splitlines()
    return [r["sent"] for r in map(json.loads, lines)
            if r["type"] == "counters" and r["group"] == "sender" and r["phase"] == "measure"]


def wait(condition, seconds: float = 30, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_the_control_socket_takes_the_keys_and_only_its_user_may_open_it(tmp_path: Path):
    """A run started with --control listens on a socket in a 0700 directory of its user's,
    named in the run directory's control.json; each request is answered as the screen's log
    says it, a rate change is recorded as the screen's is, stop ends the run (stopped_by
    control), and the socket and its pointer are gone afterwards. Without --control there is
    no socket and the client says so."""
    from harness.engine.control import ControlClient

    with background("run", *LOOPBACK, "-rl", "60", "--control", cwd=tmp_path) as run:
        run_dir = started(tmp_path / "runs", run)
        pointer = json.loads((run_dir / "control.json").read_text())
        where = Path(pointer["socket"])
        assert where.is_socket() and where.stat().st_mode & 0o777 == 0o600
        assert where.parent.stat().st_mode & 0o777 == 0o700
        client = ControlClient(run_dir)
        assert client.send(do="rate", group="sender", factor=2) == \
            "sender: rate 200.0/s per thread, 200.0/s for the group"
        assert "no group 'nobody'" in client.send(do="rate", group="nobody", factor=2)
        assert "factor 50" in client.send(do="rate", group="sender", factor=50)
        assert "is a Receiver" in client.send(do="rate", group="receiver", factor=2)
        assert "'dance'" in client.send(do="dance")
        time.sleep(2.5)
        assert client.send(do="stop").startswith("stopping")
        assert run.wait(60) == 0
    out, _ = run.communicate()
    # Its start said where the keys are taken, and how to reach them.
    assert f"the run's keys: harness view --follow runs/{run_dir.name} (its control socket " \
        f"{where}, this user's only)" in out, out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "control"
    [change] = [e for e in events(run_dir) if e["action"] == "set_rate"]
    assert change["group"] == "sender" and change["rate_per_thread"] == 200.0
    assert sent_per_interval(run_dir)[-2] >= 180  # the doubled rate reached the sender
    assert not (run_dir / "control.json").exists() and not where.exists()

    with background("run", *LOOPBACK, "-rl", "3", cwd=tmp_path / "runs") as plain:
        plain_dir = started(tmp_path / "runs" / "runs", plain)
        assert not (plain_dir / "control.json").exists()
        assert "takes no commands" in ControlClient(plain_dir).send(do="stop")
        assert plain.wait(60) == 0


def test_view_follow_shows_a_run_of_another_process_steers_it_then_replays_it(tmp_path: Path):
    """The live screen on a run started in another process with --control: intervals arrive
    as it writes them, + raises its rate (recorded as the run's own event), q stops it, and
    once it has ended the same screen steps through it as a replay."""
    from harness.rundir.reader import load
    from harness.screen.app import RunApp
    from harness.screen.follow import FollowFeed

    with background("run", *LOOPBACK, "-rl", "120", "--control", cwd=tmp_path) as run:
        run_dir = started(tmp_path / "runs", run)
        feed = FollowFeed(run_dir, load(run_dir))
        app = RunApp(feed, close_when_done=False)
        seen: dict[str, object] = {}

        async def scenario() -> None:
            async with app.run_test(size=(160, 48)) as pilot:
                for _ in range(40):
                    await pilot.pause(0.25)
                    if feed.board.groups["sender"].total > 0 and feed.live:
                        break
                seen["following"] = feed.status().position
                before = feed.board.groups["sender"].total
                await pilot.press("plus")
                await pilot.pause(2.5)
                seen["grew"] = feed.board.groups["sender"].total > before
                await pilot.press("q")
                for _ in range(120):
                    await pilot.pause(0.25)
                    if feed.after is not None:
                        break
                await pilot.pause(0.5)
                seen["ended"] = feed.status().position
                await pilot.press("left")
                await pilot.pause(0.3)
                seen["stepped"] = feed.status().position
                await pilot.press("q")

        asyncio.run(scenario())
        assert run.wait(60) == 0
    assert seen["following"] == "following; the keys steer the run"
    assert seen["grew"] is True
    log = "\n".join(app.log_lines)
    assert "sender: rate 110.0/s per thread" in log, log
    assert "the run has ended" in log
    assert str(seen["ended"]).startswith("replay ") and "stopped" in str(seen["ended"])
    slots = len(feed.after.slots) if feed.after else 0
    assert seen["stepped"] == f"replay {slots - 1}/{slots} intervals, stopped"
    assert json.loads((run_dir / "summary.json").read_text())["stopped_by"] == "control"
    [change] = [e for e in events(run_dir) if e["action"] == "set_rate"]
    assert change["rate_per_thread"] == pytest.approx(110.0)


def test_a_run_without_control_is_followed_and_its_keys_say_why_not(tmp_path: Path):
    from harness.rundir.reader import load
    from harness.screen.follow import FollowFeed

    with background("run", *LOOPBACK, "-rl", "3", cwd=tmp_path) as run:
        run_dir = started(tmp_path / "runs", run)
        feed = FollowFeed(run_dir, load(run_dir))
        assert not feed.live
        assert "without --control" in feed.status().position
        assert "takes no commands" in feed.change_rate("sender", 1.1)
        assert run.wait(60) == 0
    wait(lambda: feed.poll() is not None and feed.after is not None, what="never ended")
    assert feed.board.groups["sender"].total == \
        json.loads((run_dir / "summary.json").read_text())["groups"]["sender"]["sent"]
    feed.close()


# -- in a browser ---------------------------------------------------------------------------

@pytest.mark.browser
def test_the_served_page_lists_runs_opens_one_live_and_its_keys_steer_and_stop_it(
        tmp_path: Path):
    """harness serve in headless Chromium: the page lists the runs under its directory (a
    finished one and one going), Enter opens the one going, followed; + pressed in the page
    raises its rate (in the run's interval records), q stops it. Screenshots are kept in
    .artifacts/."""
    from tests.browser import ARTIFACTS, Page

    runs = tmp_path / "runs"
    done = subprocess.run(harness_command("run", *LOOPBACK, "-rl", "2", "-n", "earlier"),
                          cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    port = free_port()
    with background("run", *LOOPBACK, "-rl", "120", "-n", "going", "--control",
                    cwd=tmp_path) as run, \
            background("serve", str(runs), "--port", str(port), cwd=tmp_path) as served:
        run_dir = started(runs, run)
        page = Page()
        try:
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for("2 run(s) under", "(1 running)", "earlier", "going")
            page.screenshot(ARTIFACTS / "serve-runs.png")
            page.press("enter")  # the newest first: the run going
            page.wait_for("following; the keys steer the run", "sender")
            first = elapsed_shown(page)
            time.sleep(2.5)
            assert elapsed_shown(page) > first  # its intervals advance on the page
            page.press("+")
            page.wait_for("sender: rate 110.0/s per thread")
            time.sleep(2.5)
            page.screenshot(ARTIFACTS / "serve-run.png")
            page.press("q")
            assert run.wait(60) == 0, run.communicate()
            page.wait_for("the run has ended")
        finally:
            page.close()
        assert served.poll() is None  # the page server goes on for the next page
    [change] = [e for e in events(run_dir) if e["action"] == "set_rate"]
    assert change["rate_per_thread"] == pytest.approx(110.0)
    rates = sent_per_interval(run_dir)
    assert rates[-2] >= 105, rates  # the raised rate, sent
    assert json.loads((run_dir / "summary.json").read_text())["stopped_by"] == "control"


@pytest.mark.browser
def test_a_run_started_with_serve_opens_its_own_page(tmp_path: Path):
    from tests.browser import ARTIFACTS, Page

    port = free_port()
    with background("run", *LOOPBACK, "-rl", "120", "--serve", str(port), cwd=tmp_path) as run:
        run_dir = started(tmp_path / "runs", run)
        page = Page()
        try:
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for("following; the keys steer the run", "loopback.Sender")
            page.press("-")
            page.wait_for("sender: rate 90.0/s per thread")
            page.screenshot(ARTIFACTS / "run-serve.png")
            page.press("q")
            assert run.wait(60) == 0, run.communicate()
        finally:
            page.close()
    [change] = [e for e in events(run_dir) if e["action"] == "set_rate"]
    assert change["rate_per_thread"] == pytest.approx(90.0)
    # The page went with the run, and the screen the page started with it.
    import psutil

    left = [p for p in psutil.process_iter(["cmdline"]) if "--follow" in (p.info["cmdline"] or [])
            and str(run_dir) in " ".join(p.info["cmdline"])]
    assert not left, [p.info["cmdline"] for p in left]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


@pytest.mark.browser
def test_another_address_needs_the_token_the_page_presents(tmp_path: Path):
    """Served on every interface: refused without a token at start; with one, a request
    without it is 403 (the page and its WebSocket alike), the page opened with ?token= works
    and keeps working from its cookie. The token is not printed."""
    from tests.browser import Page

    runs = tmp_path / "runs"
    runs.mkdir()
    refused = subprocess.run(harness_command("serve", str(runs), "--host", "0.0.0.0"),
                             cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--host" in refused.stderr and "token" in refused.stderr
    secret = "page-token-" + os.urandom(6).hex()
    port = free_port()
    with background("serve", str(runs), "--host", "0.0.0.0", "--port", str(port),
                    "--token-env", "PAGE_TOKEN", cwd=tmp_path,
                    extra_env={"PAGE_TOKEN": secret}) as served:
        import urllib.error
        import urllib.request

        wait(lambda: _answers(port), what="the server did not start")
        for path in ("/", "/ws", "/static/js/textual.js", f"/?token={secret}x"):
            with pytest.raises(urllib.error.HTTPError) as refused_page:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
            assert refused_page.value.code == 403, path
        page = Page()
        try:
            page.goto(f"http://127.0.0.1:{port}/?token={secret}")
            page.wait_for("0 run(s) under")
            assert page.status("/static/js/textual.js") == 200  # from the cookie
        finally:
            page.close()
        served.terminate()
        out, err = served.communicate(timeout=20)
    assert secret not in out + err
    assert "?token=" in out


def elapsed_shown(page) -> str:  # type: ignore[no-untyped-def]
    """The last `elapsed H:MM:SS` the page was sent to draw."""
    import re

    return re.findall(r"elapsed (\d+:\d\d:\d\d)", page.text())[-1]


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
