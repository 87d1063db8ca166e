"""TLS on the AMQP 0-9-1, AMQP 1.0, NATS and Redis transports, against real servers with a
certificate signed by a CA of the test's own: RabbitMQ given a TLS listener at run time, and a
nats-server and a redis-server of the test's own. With --ca the server is verified and
messages go through; without it the start fails in one line that names the cause, at once.
(MQTT and HTTPS have theirs in test_mqtt.py and test_http.py.)"""

import json
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


def test_a_client_certificate_logs_in_on_every_rabbitmq_protocol(harness, brokers, tmp_path):
    """A RabbitMQ node that takes logins from TLS client certificates: --cert-login (SASL
    EXTERNAL) on AMQP 0-9-1 and 1.0, and on STOMP and MQTT the certificate with no --user
    (ssl_cert_login), each a producer and a consumer losing nothing; a certificate the
    test's CA signed for a name that is no user is refused in one line; --cert-login without
    a certificate, or beside a user, is refused before the run."""
    from tests.conftest import make_client_certificate
    from tests.servers import CertLoginRabbitMQ

    folder = tmp_path / "certificates"
    folder.mkdir()
    make_certificates(folder)
    cert, key = make_client_certificate(folder, "harness-client")
    stranger = make_client_certificate(folder, "stranger")
    server = CertLoginRabbitMQ(tmp_path / "rabbitmq", folder, "harness-client")
    server.start()
    ports = server.ports

    def tls(certificate: tuple[Path, Path] = (cert, key)) -> list[str]:
        return ["--tls", "--ca", str(folder / "ca.pem"), "--cert", str(certificate[0]),
                "--key", str(certificate[1])]

    cases = [
        ("amqp", "Sender", "Receiver", ["--port", str(ports["amqps"]), "--cert-login"]),
        ("amqp10", "Sender", "Receiver", ["--port", str(ports["amqps"]), "--cert-login",
                                          "--flavour", "rabbitmq"]),
        ("stomp", "Sender", "Receiver", ["--port", str(ports["stomps"]), "--flavour",
                                         "rabbitmq", "--vhost", "/"]),
        ("mqtt", "Publisher", "Subscriber", ["--port", str(ports["mqtts"]), "--flavour",
                                             "rabbitmq", "--qos", "1"]),
    ]
    try:
        runs = {}
        for transport, producer, consumer, flags in cases:
            destination = unique("certlogin").replace(".", "-")
            both = [*flags, *tls()]
            runs[transport] = harness(
                "run", "-m", f"{transport}.{producer}", "-d", destination, "-rt", "50",
                *both, "-g", shlex.join(["-m", f"{transport}.{consumer}", "-d", destination,
                                         *both]), "-rl", "2", "-ss", "1", "--no-ui", "-o",
                str(tmp_path / transport), output=False)
        stranger_run = harness("run", "-m", "amqp.Sender", "-d", "q", "-rl", "1", "--port",
                               str(ports["amqps"]), "--cert-login", *tls(stranger), "--no-ui",
                               "-o", str(tmp_path / "stranger"), output=False)
    finally:
        server.stop()
    for transport, done in runs.items():
        assert done.code == 0, (transport, done.stderr)
        (run_dir,) = (tmp_path / transport).iterdir()
        delivery = json.loads((run_dir / "summary.json").read_text())["delivery"][0]
        # 50 a second for 2 s: every one sent is received; beside the suite's load the
        # schedule's last send or two may fall after the stop.
        assert delivery["expected"] == delivery["received"] >= 95, (transport, delivery)
    assert stranger_run.code == 1 and len(stranger_run.stderr.strip().splitlines()) == 1, \
        stranger_run.stderr
    assert "ACCESS_REFUSED" in stranger_run.stderr, stranger_run.stderr
    for flags, words in ((["--cert-login"], "needs --tls and --cert"),
                         (["--cert-login", *tls(), "--user", "u"], "give no --user")):
        refused = harness("run", "-m", "amqp.Sender", "-d", "q", *flags, "--check")
        assert refused.code == 2 and refused.stderr.startswith(
            "harness: error: --cert-login: ") and words in refused.stderr, refused.stderr
