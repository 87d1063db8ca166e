"""A run needs an open file for each connection: each process raises its soft limit to the
hard one, and a run that needs more in one process than the hard limit allows is refused
before it starts. The harness runs here under a soft limit of 256 and a hard one of 4,096,
set for it alone (lowering a limit needs no privilege)."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

from tests.conftest import env, free_port, harness_command

SOFT, HARD = 256, 4096


def limited(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, HARD))

    return subprocess.run(harness_command("run", *args, "-o", str(cwd / "runs")),
                          capture_output=True, text=True, timeout=120, env=env(), cwd=cwd,
                          preexec_fn=lower)


def test_more_connections_than_a_process_may_open_are_refused_in_one_line(tmp_path):
    done = limited("-m", "mqtt.Sender", "-d", "q", "-nt", "5000", "-rl", "1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("harness: error: -nt: sender: 5,000 connections in one process, "
                           "and a process may have 4,096 open files here"), line
    assert not (tmp_path / "runs").exists()  # refused before anything was written


def test_the_soft_limit_is_raised_to_the_hard_one(tmp_path):
    # 500 MQTT clients hold more than 256 files (paho keeps a socket pair beside each
    # connection): under the soft limit they would fail with "Too many open files"; raised,
    # they are made, and the run fails only as a broker that is not there makes it fail.
    port = free_port()
    done = limited("-m", "mqtt.Sender", "-d", "q", "-nt", "500", "-rl", "1", "--port",
                   str(port), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Too many open files" not in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr and "cannot" in done.stderr, done.stderr


def test_clients_count_the_files_their_transport_holds_for_each(tmp_path):
    # An AMQP connection holds its socket and the epoll pika's loop waits on: 2,500 clients
    # need 5,000 files and are refused; as many MQTT clients need one each.
    done = limited("-m", "amqp.Sender", "-d", "q", "--clients", "2500", "-rl", "1",
                   cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("harness: error: --clients: sender: 2,500 connections of 2 open "
                           "files each in one process, and a process may have 4,096"), line
    port = free_port()
    done = limited("-m", "mqtt.Sender", "-d", "q", "--clients", "2500", "-rl", "1", "--port",
                   str(port), cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # past the check: no broker on that port
    assert f"127.0.0.1:{port}" in done.stderr, done.stderr
