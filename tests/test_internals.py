"""The client libraries' internals the harness relies on, checked one by one: when an upgrade
changes one, this fails naming it, instead of a transport going wrong in a run. pyproject.toml
bounds each of these libraries to the major release tested."""

from __future__ import annotations

import asyncio
import inspect

import numpy as np
from hdrh.histogram import HdrHistogram

from harness.stats.histogram import _acyclic, counts_indexes, counts_view, new_histogram


def test_hdrhistogram_counts_are_indexed_as_the_harness_computes_them() -> None:
    # harness.stats.histogram folds a buffer of values in with NumPy, computing each value's
    # counts index itself: it must agree with the library's own, over the whole range.
    histogram = new_histogram()
    values = np.unique(np.geomspace(1, 3_600_000_000, 5_000).astype(np.int64))
    ours = counts_indexes(histogram, values)
    theirs = [histogram._counts_index_for(int(v)) for v in values]
    assert ours.tolist() == theirs, "hdrhistogram's counts index changed"
    view = counts_view(histogram)
    histogram.record_value(1234)
    assert view.sum() == 1, "hdrhistogram's counts are no longer a ctypes array to share"


def test_hdrhistogram_encoder_points_back_at_its_histogram() -> None:
    histogram = HdrHistogram(1, 3_600_000_000, 3)
    assert histogram.encoder.histogram is histogram, "hdrhistogram's encoder changed"
    _acyclic(histogram)
    histogram.record_value(5)
    assert HdrHistogram.decode(histogram.encode()).get_total_count() == 1


def test_nats_py_publish_is_a_coroutine_driven_by_hand() -> None:
    # modules/nats.py drives nats-py's publish coroutine to its end outside the loop
    # (coroutine.send(None)) and reads the client's pending buffer size.
    from nats.aio.client import Client

    assert inspect.iscoroutinefunction(Client.publish), "nats-py's publish is no coroutine"
    assert isinstance(getattr(Client, "pending_data_size", None), property), \
        "nats-py's Client.pending_data_size is gone"


def test_pika_keeps_its_transport_whose_write_buffer_the_amqp_transport_reads() -> None:
    from pika.adapters import base_connection

    assert "self._transport" in inspect.getsource(base_connection.BaseConnection.__init__), \
        "pika's connection no longer keeps _transport (modules/amqp.py _unwritten)"


def test_proton_blocking_connection_notes_a_lost_transport_in_disconnected() -> None:
    # modules/amqp10.py turns the container itself and asks BlockingConnection.disconnected
    # after each step: Proton's handler only notes a lost transport there.
    import proton.utils

    source = inspect.getsource(proton.utils.BlockingConnection)
    assert "self.disconnected" in source, "Proton's BlockingConnection.disconnected is gone"


def test_asyncio_lets_a_thread_enter_a_loop_by_hand() -> None:
    # modules/kit/turned.py enters a loop without run_forever().
    assert callable(asyncio.events._set_running_loop)
    assert callable(asyncio.events._get_running_loop)


def test_pika_ioloop_keeps_its_poller_and_the_poller_its_epoll() -> None:
    # modules/amqp.py _poller_fd: many AMQP clients on one thread (--clients) wait on each
    # connection's epoll descriptor.
    from pika.adapters import select_connection

    assert "self._poller" in inspect.getsource(select_connection.IOLoop.__init__), \
        "pika's IOLoop no longer keeps _poller (modules/amqp.py _poller_fd)"
    assert "self._poll = self._create_poller()" in inspect.getsource(
        select_connection.PollPoller), \
        "pika's poller no longer keeps its epoll in _poll (modules/amqp.py _poller_fd)"


def test_websocket_client_keeps_its_frame_readers_utf8_switch() -> None:
    # modules/stomp.py lets a WebSocket's text frames carry any bytes (a body over RabbitMQ's
    # web_stomp) by turning off the UTF-8 check of the connection's frame readers.
    from websocket import WebSocket

    ws = WebSocket()
    assert ws.frame_buffer.skip_utf8_validation is False
    assert ws.cont_frame.skip_utf8_validation is False
    assert ws.sock is None  # the socket beneath, where TCP_NODELAY and a send timeout go


def test_paho_websocket_wrapper_keeps_its_socket() -> None:
    # modules/mqtt.py sets TCP_NODELAY on the socket beneath paho's WebSocket wrapper.
    from paho.mqtt.client import _WebsocketWrapper

    assert "self._socket = socket" in inspect.getsource(_WebsocketWrapper.__init__)


def test_paho_keeps_the_private_calls_the_mqtt_transport_uses() -> None:
    # modules/mqtt.py wraps _send_pingreq and _handle_pingresp on each client (_watch_pings:
    # a PINGRESP proves every QoS 0 publish written before its PINGREQ), and reads
    # _last_bytes_received (a silent connection) and _client_id (named in a lost SUBACK).
    import paho.mqtt.client as paho

    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="internals")
    for name in ("_send_pingreq", "_handle_pingresp"):
        assert callable(getattr(client, name, None)), f"paho's Client.{name} is gone"
    # Called through the instance attribute the transport replaces, not bound elsewhere.
    assert "self._send_pingreq()" in inspect.getsource(paho.Client._check_keepalive), \
        "paho's keep-alive no longer calls self._send_pingreq"
    assert "self._handle_pingresp()" in inspect.getsource(paho.Client._packet_handle), \
        "paho no longer handles a PINGRESP through self._handle_pingresp"
    assert isinstance(client._last_bytes_received, float), \
        "paho's Client._last_bytes_received is gone"
    assert client._client_id == b"internals", "paho's Client._client_id changed"
