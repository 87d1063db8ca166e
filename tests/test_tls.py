"""TLS on the AMQP 0-9-1, AMQP 1.0, NATS and Redis transports, against real servers with a
certificate signed by a CA of the test's own: RabbitMQ given a TLS listener at run time, and a
nats-server and a redis-server of the test's own. With --ca the server is verified and
messages go through; without it the start fails in one line that names the cause, at once.
(MQTT and HTTPS have theirs in test_mqtt.py and test_http.py.)"""

import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import free_port, make_certificates, unique, wait_for_port


def rabbitmqctl_eval(expression: str) -> str:
    return subprocess.run(["rabbitmqctl", "-q", "eval", expression], capture_output=True,
                          text=True, check=True, timeout=60).stdout.strip()


@pytest.fixture(scope="module")
def rabbitmq_tls(brokers):
    """A TLS listener on the running RabbitMQ, on a port of its own, for this module's tests;
    the files where the broker's user can read them."""
    folder = Path(tempfile.mkdtemp(prefix="harness-tls-", dir="/var/tmp"))
    folder.chmod(0o755)
    make_certificates(folder)
    for file in folder.iterdir():
        file.chmod(0o644)
    port = free_port()
    listener = f'{{"127.0.0.1", {port}}}'
    files = ", ".join(f'{{{key}, "{folder / name}"}}' for key, name in (
        ("certfile", "server.pem"), ("keyfile", "server.key"), ("cacertfile", "ca.pem")))
    assert rabbitmqctl_eval(f"rabbit_networking:start_ssl_listener({listener}, [{files}], "
                            "1).") == "ok"
    wait_for_port(port)
    yield port, folder / "ca.pem"
    rabbitmqctl_eval(f"rabbit_networking:stop_tcp_listener({listener}).")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def nats_tls(tmp_path):
    make_certificates(tmp_path)
    port = free_port()
    proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port), "--tls",
                             "--tlscert", str(tmp_path / "server.pem"),
                             "--tlskey", str(tmp_path / "server.key")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    yield port, tmp_path / "ca.pem"
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def redis_tls(tmp_path):
    make_certificates(tmp_path)
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", "0", "--tls-port", str(port),
                             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--tls-cert-file", str(tmp_path / "server.pem"),
                             "--tls-key-file", str(tmp_path / "server.key"),
                             "--tls-ca-cert-file", str(tmp_path / "ca.pem"),
                             "--tls-auth-clients", "no", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    yield port, tmp_path / "ca.pem"
    proc.terminate()
    proc.wait(10)


# (transport, producer, consumer, the server fixture)
CASES = [
    ("amqp", "Sender", "Receiver", "rabbitmq_tls"),
    ("amqp10", "Sender", "Receiver", "rabbitmq_tls"),
    ("nats", "Publisher", "Subscriber", "nats_tls"),
    ("redis", "Publisher", "Subscriber", "redis_tls"),
    ("redis", "Sender", "Receiver", "redis_tls"),
]


@pytest.mark.parametrize("transport, producer, consumer, server", CASES)
def test_tls_verified_against_the_tests_own_ca(harness, request, transport, producer,
                                               consumer, server):
    port, ca = request.getfixturevalue(server)
    d = unique("tls")
    tls = f"--port {port} --tls --ca {ca}"
    done = harness("run", "-m", f"{transport}.{producer}", "-d", d, "-mg", "300", "-rt", "600",
                   *shlex.split(tls), "-ss", "1",
                   "-g", f"-m {transport}.{consumer} -d {d} {tls}")
    assert done.code == 0, done.stderr
    groups = done.summary["groups"]
    assert groups[producer.lower()]["sent"] == 300
    assert groups[consumer.lower()]["received"] == 300
    assert groups[producer.lower()]["errors"] == groups[consumer.lower()]["errors"] == 0


@pytest.mark.parametrize("transport, producer, server", sorted(
    {(t, p, s) for t, p, _, s in CASES}))
def test_tls_refuses_a_server_it_cannot_verify_at_once(harness, request, transport, producer,
                                                       server):
    port, _ = request.getfixturevalue(server)
    result = harness("run", "-m", f"{transport}.{producer}", "-d", "secure", "-mg", "1",
                     "--port", str(port), "--tls", timeout=30)
    assert result.code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot connect to 127.0.0.1:{port}" in lines[0], result.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in lines[0].upper().replace(" ", "_"), lines[0]
