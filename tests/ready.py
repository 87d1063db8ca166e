"""Readiness by use: a server, or a plugin just enabled, is ready once it has done what the
tests will ask of it (an MQTT SUBSCRIBE answered with its SUBACK, a STOMP SUBSCRIBE with its
receipt, over TCP or over a WebSocket path), not once its port accepts connections. A fresh
RabbitMQ node's MQTT plugin, for one, accepts connections and closes them until its
client-id tracker (a Raft cluster) has elected a leader, and its web plugins answer the
WebSocket upgrade before they take a subscription."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

Probe = Callable[[], str | None]  # None once ready, else what it found instead


def wait_ready(what: str, probe: Probe, seconds: float = 90) -> None:
    """Until probe() says ready; else one line naming the server and what it did instead."""
    deadline = time.monotonic() + seconds
    while True:
        found = probe()
        if found is None:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not ready after {seconds:g} s: {found}")
        time.sleep(0.3)


def mqtt_subscribes(host: str, port: int, path: str | None = None, clean: bool = True,
                    login: tuple[str, str] | None = None) -> Probe:
    """A CONNECT, then a QoS 1 SUBSCRIBE (of a persistent session where not clean: for a
    private server, which keeps the session's queue), answered; over a WebSocket at path
    where given."""

    def probe() -> str | None:
        import paho.mqtt.client as paho

        client_id = f"harness-ready-{uuid.uuid4().hex[:8]}"
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id, clean_session=clean,
                             transport="websockets" if path else "tcp")
        if path:
            client.ws_set_options(path=path)
        if login:
            client.username_pw_set(*login)
        connected, subscribed = threading.Event(), threading.Event()
        answer: list[str] = []

        def on_connect(_c: object, _u: object, _f: object, reason: object, _p: object) -> None:
            answer.append(f"CONNACK {reason}")
            connected.set()

        def on_subscribe(_c: object, _u: object, _m: object, reasons: object,
                         _p: object) -> None:
            answer.append(f"SUBACK {reasons}")
            subscribed.set()

        client.on_connect, client.on_subscribe = on_connect, on_subscribe
        try:
            client.connect(host, port, keepalive=10)
        except OSError as exc:
            return f"connect: {exc}"
        client.loop_start()
        try:
            if not connected.wait(5):
                return "no CONNACK"
            if answer[-1] != "CONNACK Success":
                return answer[-1]
            client.subscribe(f"harness/ready/{client_id}", qos=1)
            if not subscribed.wait(5):
                return "no SUBACK"
            if "Granted QoS 1" not in answer[-1]:
                return answer[-1]
            return None
        finally:
            client.disconnect()
            client.loop_stop()

    return probe


def stomp_subscribes(host: str, port: int, path: str | None = None, vhost: str = "/",
                     login: tuple[str, str] | None = None) -> Probe:
    """A CONNECT, then a SUBSCRIBE with a receipt, answered; over a WebSocket at path where
    given."""

    def probe() -> str | None:
        import stomp
        from stomp.adapter.ws import WSStompConnection

        if path:
            conn = WSStompConnection([(host, port)], ws_path=path, vhost=vhost, timeout=5)
        else:
            conn = stomp.Connection12([(host, port)], vhost=vhost, timeout=5)
        receipts: list[str] = []
        listener = stomp.ConnectionListener()
        listener.on_receipt = lambda frame: receipts.append(frame.headers.get("receipt-id", ""))
        conn.set_listener("ready", listener)
        try:
            conn.connect(*(login or ("guest", "guest")), wait=True)
            receipt = uuid.uuid4().hex
            conn.subscribe(f"/topic/harness.ready.{receipt[:8]}", id="ready", ack="auto",
                           headers={"receipt": receipt})
            deadline = time.monotonic() + 5
            while receipt not in receipts:
                if time.monotonic() > deadline:
                    return "no RECEIPT for SUBSCRIBE"
                time.sleep(0.05)
            return None
        except (stomp.exception.StompException, OSError) as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            if conn.is_connected():
                conn.disconnect()

    return probe
