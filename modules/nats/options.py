"""The NATS transport's options, and what it refuses before a run: subjects the protocol
would misread, JetStream's settings, and one complete way to authenticate."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from harness.modules.interface.base import Capability
from harness.modules.interface.options import HEARTBEAT_S, option
from harness.modules.interface.settings import Settings
from harness.modules.kit.client_config import client_config_option, library_settings, parameters

# nats-py's connect() arguments that a flag gives (--client-config refuses them, naming it) or
# that the harness owns: its callbacks count outages, it allows reconnecting for ever, and it
# times the first attempt itself.
CLIENT_FLAGGED = {"servers": "--host/--port", "name": "--client-id", "tls": "--tls",
                  "tls_hostname": "--tls", "user": "--user", "password": "--password",
                  "token": "--token", "user_credentials": "--creds", "nkeys_seed": "--nkey",
                  "nkeys_seed_str": "--nkey", "ping_interval": "--heartbeat",
                  "max_outstanding_pings": "--heartbeat"}
CLIENT_OWNED = ("error_cb", "disconnected_cb", "closed_cb", "discovered_server_cb",
                "reconnected_cb", "lame_duck_mode_cb", "signature_cb", "user_jwt_cb",
                "reconnect_to_server_handler", "allow_reconnect", "max_reconnect_attempts",
                "reconnect_time_wait", "connect_timeout", "pending_size")


@cache
def client_settings(items: tuple[str, ...]) -> dict[str, Any]:
    """--client-config as nats-py's connect() keyword arguments."""
    from nats.aio.client import Client

    return library_settings(items, parameters(Client.connect), "nats-py's connect()",
                            CLIENT_FLAGGED, CLIENT_OWNED)


@dataclass(frozen=True)
class NatsOptions:
    heartbeat: float = option(HEARTBEAT_S, "", scope="connection", low=0)
    client_config: tuple[str, ...] = client_config_option()
    jetstream: bool = option(False, "NATS JetStream: publish to a stream (acknowledged by the "
                             "server) and consume through JetStream consumers.")
    stream: str | None = option(None, "JetStream stream name, created if missing (default: "
                                "harness- and the subject).")
    storage: str = option("file", "JetStream stream storage: file or memory.")
    retention: str = option("limits", "JetStream stream retention: limits, workqueue or "
                            "interest.")
    pull_batch: int = option(0, "JetStream pull consumer fetching N messages a request; 0 = a "
                             "push consumer.", low=0, side="receive")
    ack_wait: float = option(0.0, "JetStream: seconds a consumer's message may stay "
                             "unacknowledged before the server delivers it again (counted as "
                             "redelivered); 0 = the server's default, 30 s.", low=0, side="receive")
    pending_limit: int = option(0, "Messages a subscription may hold before nats-py drops "
                                "new ones as a slow consumer (counted as errors and lost); "
                                "0 = nats-py's default, 524,288.", low=0, side="receive")
    prefetch: int = option(0, "", scope="connection", low=0, side="receive")
    inflight: int = option(20, "", scope="connection", low=1, high=65535, side="send")
    ack: str = option("auto", "", scope="connection", side="receive")
    token: bool = option(False, "Authenticate with a token: the secret given by --password, "
                         "--password-env or --password-file, sent with no user.")
    nkey: str | None = option(None, "Authenticate with an nkey: the file holding its seed "
                              "(SU...), which signs the server's challenge; read at every "
                              "connection, so that a new seed takes effect at the next.")
    creds: str | None = option(None, "Authenticate as the user of a credentials file (.creds, "
                               "as nsc writes it: the user's JWT and nkey seed), for a server in "
                               "operator mode; read at every connection.")


def stream_name(subject: str) -> str:
    """A stream name from a subject: stream names take no dots, wildcards or spaces."""
    return "harness-" + re.sub(r"[^A-Za-z0-9_-]", "_", subject)
STORAGES = ("file", "memory")
RETENTIONS = ("limits", "workqueue", "interest")  # nats-py's RetentionPolicy values
ACK_MODES = ("auto", "client", "client-individual")

# Properties travel as NATS headers, core and JetStream alike.
CORE = Capability.QUEUES | Capability.TOPICS | Capability.REQUEST_REPLY | \
    Capability.TEMP_QUEUES | Capability.PROPERTIES
JETSTREAM = Capability.QUEUES | Capability.TOPICS | Capability.PERSISTENT | \
    Capability.DURABLE | Capability.PROPERTIES
BAD_STREAM_NAME = re.compile(r"[.*>/\\\s]|[^ -~]")


def _subject_problems(settings: Settings[Any]) -> list[str]:
    """What the protocol would misread: white space splits a PUB line (a second word is
    taken for the reply subject), and a producer's wildcard matches no subscription."""
    subject = settings.destination
    if not subject:
        return []
    if re.search(r"\s", subject):
        return [f"{subject!r}: a NATS subject takes no white space"]
    if "" in subject.split("."):
        return [f"{subject!r}: a NATS subject has no empty token (no leading, trailing or "
                "double '.')"]
    if settings.publishes and any(token in ("*", ">") for token in subject.split(".")):
        return [f"{subject!r}: {settings.role} publishes; wildcards (* and >) are for "
                "subscribing"]
    return []


# What a credentials file holds, in the markers nats-py looks for (it reads a file without
# the first for ever).
CREDS_MARKERS = ("BEGIN NATS USER JWT", "BEGIN USER NKEY SEED")


def _auth_problems(settings: Settings[NatsOptions]) -> list[tuple[str, str]]:
    """One way to authenticate, complete, its file readable and of its kind: nats-py would
    send a token and a user together, and hang on a credentials file without a JWT."""
    o = settings.options
    given = [flag for flag, on in (("--token", o.token), ("--nkey", o.nkey),
                                   ("--creds", o.creds)) if on]
    if len(given) > 1:
        return [(given[1], f"authenticates another way than {given[0]}: give one")]
    if not given:
        return []
    flag, out = given[0], []
    if settings.user:
        out.append((flag, "authenticates without a user: drop --user"))
    if o.token:
        if not settings.password:
            out.append((flag, "sends the password as the token: give --password-env or "
                        "--password-file"))
        return out
    path = o.nkey or o.creds
    assert path is not None
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError as exc:
        return [*out, (flag, f"cannot read {path}: {exc.strerror}")]
    if o.nkey and not text.strip().startswith("SU"):
        out.append((flag, f"{path} holds no user nkey seed (one line beginning SU)"))
    if o.creds and not all(marker in text for marker in CREDS_MARKERS):
        out.append((flag, f"{path} is not a credentials file (it has no "
                    f"{' and no '.join(m for m in CREDS_MARKERS if m not in text)})"))
    if importlib.util.find_spec("nkeys") is None:
        out.append((flag, "needs the nkeys package: pip install 'broker-harness[nats]'"))
    return out

