"""Conditions the whole suite met by chance on a new machine, each brought about on purpose and
judged by a witness of its own (the broker's count, the broker's own client): a RabbitMQ node
crashed right after it confirmed AMQP 1.0 persistent sends. (A connection reset under a STOMP
acknowledgement is the cut matrix's, tests/test_fault_matrix.py; a producer silenced for good
is tests/test_ledger.py's.)"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import harness_command, only_run_dir
from tests.servers import RabbitMQ


def queue_depth(port: int, queue: str) -> int:
    """What RabbitMQ says it holds in `queue` (pika's passive declare: an error where there
    is no such queue)."""
    import pika

    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        return connection.channel().queue_declare(queue, passive=True).method.message_count
    finally:
        connection.close()


def summary_of(out: Path) -> dict[str, Any]:
    run_dir = only_run_dir(out)
    assert run_dir is not None
    return json.loads((run_dir / "summary.json").read_text())


def test_amqp10_persistent_sends_rabbitmq_confirmed_are_all_there_after_a_crash(tmp_path):
    """No consumer: every confirmed send stays in the queue, and the node is SIGKILLed the
    moment the run ends. RabbitMQ declares a `/queue/` address on the link's attach, durable
    only where the link asks: a transient queue lost its messages with the node (the crash
    matrix's 'missing 11')."""
    import subprocess

    server = RabbitMQ(tmp_path / "rabbit")
    queue = f"crash.{uuid.uuid4().hex[:10]}"
    out = tmp_path / "runs"
    try:
        server.start()
        port = server.ports["amqp"]
        done = subprocess.run(harness_command(
            "run", "-m", "amqp10.Sender", "-d", queue, "-pp", "--confirm", "20", "--flavour",
            "rabbitmq", "--port", str(port), "-rt", "200", "-rl", "2", "--no-ui", "-o",
            str(out)), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        sender = summary_of(out)["groups"]["sender"]
        assert sender["sent"] > 300 and sender["in_doubt"] == sender["refused"] == 0, sender
        server.kill()
        server.start()
        assert queue_depth(port, queue) == sender["sent"]
    finally:
        server.stop()
