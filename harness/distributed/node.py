"""One node of a distributed run: the body of one task of the Spark barrier stage.

The task connects back to the driver, measures its clock's offset from the driver's, runs the
node's share of the run with the same controller as a single-machine run, and streams each
interval's reports to the driver as its processes give them. The nodes agree on one start
through the barrier: allGather tells every node whether every other is ready (either all
start or none does), then the driver, once every node has said so, names one start a little
ahead in its own clock, and each node converts it to its own.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.clock import epoch_ns
from harness.distributed.shipping import Shipper
from harness.distributed.split import node_name, node_spec
from harness.distributed.wire import SEND_TIMEOUT_S, Link, report_to_wire
from harness.engine.runner import Controller
from harness.errors import BadInput, StartFailure
from harness.plan.run import RunSpec
from harness.rundir.sinks import Closed, Sink

CLOCK_PROBES = 16
CONNECT_TIMEOUT_S = 10.0
# How often a node says it is alive to the driver, which counts it lost after
# harness.distributed.driver.NODE_SILENCE_S without a word.
ALIVE_EVERY_S = 1.0


class NodeError(Exception):
    """Ends the task: the driver finds this line in the failed job's error."""

    def __init__(self, message: str) -> None:
        super().__init__(f"harness-node: {message}")


@dataclass
class NodePayload:
    """What every task is given: the run, and where the driver listens."""

    run: RunSpec
    run_id: str
    nodes: int
    driver: tuple[str, int]
    token: str


def clock_offset(link: Link) -> tuple[int, int]:
    """(offset, round trip) in ns of the driver's clock from this one: of several round trips,
    the one that took least, as NTP takes it: its midpoint is the least disturbed."""
    best: tuple[int, int] | None = None
    for _ in range(CLOCK_PROBES):
        sent = epoch_ns()
        link.send({"kind": "clock", "sent": sent})
        reply = link.receive()
        back = epoch_ns()
        if reply is None or reply.get("kind") != "clock":
            raise NodeError("the driver closed the connection while the clocks were compared")
        rtt = back - sent
        offset = int(reply["driver"]) - (sent + back) // 2
        if best is None or rtt < best[1]:
            best = (offset, rtt)
    assert best is not None
    return best


def connect(payload: NodePayload, rank: int, node: str) -> Link:
    host, port = payload.driver
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise NodeError(f"node {node} cannot reach the driver at {host}:{port} ({exc}); set "
                        "the address executors reach the driver at with --driver-host") from None
    sock.settimeout(None)
    link = Link(sock)
    link.send({"kind": "hello", "token": payload.token, "rank": rank, "node": node})
    return link


def node_dir(payload: NodePayload, node: str) -> Path:
    """A directory of this executor's own: the files go to the driver over the link
    (harness.distributed.shipping), the same whether or not the machines share a disk."""
    return Path(tempfile.mkdtemp(prefix=f"harness-{payload.run_id}-")) / node


def _start_time(link: Link) -> int:
    message = link.receive()
    if message is None or message.get("kind") != "start":
        raise NodeError("the driver closed the connection before the start")
    return int(message["at"])


def _obey(link: Link, controller: Controller) -> None:
    """The driver's live commands, applied as the screen's keys are on one machine."""
    for message in link.messages():
        kind = message.get("kind")
        if kind == "stop":
            controller.request_stop()
        elif kind == "pause" and controller.paused != bool(message["paused"]):
            controller.toggle_pause()
        elif kind == "rate":
            controller.change_rate(int(message["group"]), float(message["factor"]))


class Streamed(Sink):
    """A node's stream to its driver: each interval's reports, as its processes gave them,
    and what the run's files gained meanwhile."""

    def __init__(self, link: Link, node: str, shipper: Shipper,
                 cut_off: Callable[[], None]) -> None:
        self.link, self.node, self.shipper, self.cut_off = link, node, shipper, cut_off

    def interval(self, closed: Closed) -> None:
        try:
            self.link.send({"kind": "interval", "index": closed.index,
                            "reports": [report_to_wire(r, self.node) for r in closed.reports]})
            self.shipper.ship()
        except OSError:
            self.cut_off()


def _say_alive(link: Link, done: threading.Event, cut_off: Callable[[], None]) -> None:
    while not done.wait(ALIVE_EVERY_S):
        try:
            link.send({"kind": "alive"})
        except OSError:
            cut_off()
            return


def run_node(payload: NodePayload, rank: int, host: str,
             all_gather: Any) -> dict[str, Any]:
    """The node's run from connection to files; all_gather: the barrier's allGather."""
    node = node_name(host, rank)
    link = connect(payload, rank, node)
    directory = node_dir(payload, node)
    try:
        offset, rtt = clock_offset(link)
        spec = node_spec(payload.run, payload.nodes, node, payload.run_id)
        error = None
        controller: Controller | None = None
        shipper = Shipper(directory, link.send)
        try:
            controller = Controller(spec, lambda view: None,
                                    lambda line: link.send({"kind": "log", "message": line}),
                                    run_dir=directory)
            controller.prepare()
        except (BadInput, StartFailure) as exc:
            error = str(exc)
        gathered = [json.loads(g) for g in all_gather(json.dumps({"node": node,
                                                                   "error": error}))]
        if any(g["error"] for g in gathered):
            if controller is not None and error is None:
                for cell in controller.cells:
                    cell.kill()
            link.send({"kind": "failed", "error": error})
            return {"node": node, "rank": rank, "error": error}
        assert controller is not None
        # Every node is ready: the driver names the start, in its own clock, once it has
        # heard from all of them, and each node converts it to its own.
        link.send({"kind": "ready", "offset": offset, "rtt": rtt})
        start = _start_time(link)
        controller.start_at_ns = start - offset
        controller.clock = {"source": "offset from the driver's clock: the least round trip "
                                      f"of {CLOCK_PROBES} (NTP's estimate)",
                            "reference_node": "driver", "offset_estimate_s": offset / 1e9,
                            "round_trip_s": rtt / 1e9}
        shipper.ship()  # the manifest: a node lost at once still has one at the driver
        done, stop = threading.Event(), controller.request_stop

        def cut_off() -> None:
            """The driver takes nothing: it counts this node lost, so its run stops (its
            files would go nowhere)."""
            if done.is_set():  # said once; or the run ended already
                return
            done.set()
            print(f"harness-node {node}: the driver takes nothing for "
                  f"{SEND_TIMEOUT_S} s: stopping this node", file=sys.stderr, flush=True)
            stop()

        controller.sinks.append(Streamed(link, node, shipper, cut_off))
        threading.Thread(target=_obey, args=(link, controller), name="driver-commands",
                         daemon=True).start()
        threading.Thread(target=_say_alive, args=(link, done, cut_off), name="alive",
                         daemon=True).start()
        try:
            result = controller.measure()
        finally:
            done.set()
        with contextlib.suppress(OSError):  # cut off: the driver has what came before
            shipper.ship()  # the drain's last lines and the summary, before the end
            link.send({"kind": "end", "exit_code": result.exit_code,
                       "stopped_by": result.stopped_by})
        return {"node": node, "rank": rank, "error": None, "exit_code": result.exit_code}
    finally:
        link.close()
        shutil.rmtree(directory.parent, ignore_errors=True)


def node_main(payload: NodePayload, partition: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """mapPartitions' function for the barrier stage: one partition, one node."""
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    for _ in partition:
        pass
    host = socket.gethostname()
    yield run_node(payload, context.partitionId(), host, context.allGather)
