"""The Spark side of a distributed run: the session, the task slots a barrier stage needs,
and the harness package shipped to the executors."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.errors import BadInput


@dataclass
class ClusterSpec:
    master: str
    nodes: int = 2  # client nodes: tasks of one barrier stage
    driver_host: str | None = None  # where executors reach the driver's listener: HOST[:PORT]
    driver_port: int = 0  # the port the driver's listener takes (0: any free one)
    conf: dict[str, str] = field(default_factory=dict)  # further Spark settings
    ship: bool = True  # send this harness to the executors as a zip (--py-files)
    wait: float = 60.0  # seconds to wait for the executors' task slots

    @property
    def local(self) -> bool:
        """The executors run on this machine: everything talks over loopback."""
        return self.master.startswith("local")


# A profile's cluster: block, in the long flags' words; executor-* are Spark's own settings.
CLUSTER_KEYS = ("master", "nodes", "driver-host", "driver-port", "spark-conf", "executor-memory",
                "executor-cores", "wait", "ship", "output")
# Where validate_cluster's flags are in a cluster: block.
BLOCK_KEY = {"--cluster": "master", "--nodes": "nodes", "--cluster-wait": "wait",
             "--driver-host": "driver-host", "--driver-port": "driver-port",
             "--spark-conf": "spark-conf"}


def cluster_from(block: dict[str, Any]) -> ClusterSpec:
    """A profile's cluster: block as a ClusterSpec; BadInput names the block's key."""
    master = block.get("master")
    if not isinstance(master, str) or not master.strip():
        raise BadInput("master", "give the Spark master: local-cluster[2,1,1024], "
                       "spark://host:7077, yarn, k8s://...")
    given: dict[str, Any] = {}  # what the block sets; ClusterSpec's defaults hold the rest
    for key, kind in (("nodes", int), ("wait", float), ("driver-port", int)):
        if key in block:
            value = block[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    (kind is int and value != int(value)):
                what = "a whole number" if kind is int else "a number"
                raise BadInput(key, f"{value!r} is not {what}")
            given[key.replace("-", "_")] = kind(value)
    conf = block.get("spark-conf") or {}
    if not isinstance(conf, dict):
        raise BadInput("spark-conf", "a mapping of Spark settings, e.g. "
                       "spark.executor.memory: 2g")
    conf = {str(k): str(v) for k, v in conf.items()}
    for key, setting in (("executor-memory", "spark.executor.memory"),
                         ("executor-cores", "spark.executor.cores")):
        if key in block:
            conf[setting] = str(block[key])
    ship = block.get("ship", True)
    if not isinstance(ship, bool):
        raise BadInput("ship", f"{ship!r} is not true or false")
    if block.get("driver-host") is not None:
        given["driver_host"] = str(block["driver-host"])
    cluster = ClusterSpec(master.strip(), conf=conf, ship=ship, **given)
    try:
        validate_cluster(cluster)
    except BadInput as exc:
        raise BadInput(BLOCK_KEY.get(exc.where, exc.where), exc.problem) from None
    return cluster


def parse_conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInput("--spark-conf", f"{item!r}: give KEY=VALUE, e.g. "
                           "spark.executor.memory=2g")
        conf[key.strip()] = value.strip()
    return conf


def validate_cluster(cluster: ClusterSpec) -> None:
    if cluster.nodes < 1:
        raise BadInput("--nodes", f"must be at least 1, got {cluster.nodes}")
    if not cluster.master.strip():
        raise BadInput("--cluster", "give a Spark master: local-cluster[2,1,1024], "
                       "spark://host:7077, yarn, k8s://...")
    if cluster.wait <= 0:
        raise BadInput("--cluster-wait", f"must be > 0, got {cluster.wait:g}")
    if not 0 <= cluster.driver_port <= 65535:
        raise BadInput("--driver-port", f"a TCP port, 1 to 65535 (0: any free one), got "
                       f"{cluster.driver_port}")
    if cluster.driver_host is not None:
        driver_endpoint(cluster.driver_host, 0)
    # A local cluster's slots are known before Spark starts: workers x cores.
    fixed = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]",
                         cluster.master.strip())
    if fixed and int(fixed[1]) * int(fixed[2]) < cluster.nodes:
        raise BadInput("--nodes", f"{cluster.nodes} nodes need {cluster.nodes} task slots at "
                       f"once (a barrier stage); {cluster.master} has "
                       f"{int(fixed[1]) * int(fixed[2])}")


def spark_conf(cluster: ClusterSpec, drain: float) -> dict[str, str]:
    conf = {
        # A barrier stage needs every slot at once and is refused under dynamic allocation;
        # the slots are checked before the stage, so Spark need not re-check for minutes.
        "spark.dynamicAllocation.enabled": "false",
        "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "1",
        "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
        # A node stopping gracefully (producers stop, consumers drain) is not killed under it.
        "spark.python.task.killTimeout": f"{int(drain) + 30}s",
        "spark.task.maxFailures": "1",
    }
    if cluster.local:
        conf.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    conf.update(cluster.conf)
    return conf


def free_slots(spark: Any) -> int:
    """Tasks the cluster can run at once now: what a barrier stage of N tasks needs N of.
    Spark's own check, reached through its JVM (no Python API gives it)."""
    sc = spark.sparkContext._jsc.sc()
    try:
        return int(sc.maxNumConcurrentTasks(sc.resourceProfileManager()
                                            .defaultResourceProfile()))
    except Exception:  # another Spark version: count the executors' cores instead
        executors = max(sc.getExecutorMemoryStatus().size() - 1, 0)
        cores = int(spark.sparkContext.getConf().get("spark.executor.cores", "1"))
        return executors * cores


def wait_for_slots(spark: Any, cluster: ClusterSpec, say: Callable[[str], None]) -> int:
    """Executors register a little after the session starts: wait for enough slots, or fail
    with how many there are."""
    deadline = time.monotonic() + cluster.wait
    last = -1
    while True:
        slots = free_slots(spark)
        if slots >= cluster.nodes:
            return slots
        if time.monotonic() >= deadline:
            raise BadInput("--nodes", f"{cluster.nodes} nodes need {cluster.nodes} free task "
                           f"slots at once (a barrier stage), and {cluster.master} has "
                           f"{slots} after {cluster.wait:g} s")
        if slots != last:
            say(f"waiting for task slots: {slots} of {cluster.nodes}")
            last = slots
        time.sleep(0.25)


def driver_endpoint(given: str, listening: int) -> tuple[str, int]:
    """--driver-host HOST[:PORT] as the address and port executors connect to: the port the
    driver listens on unless another is given (a NAT or a port forward in between)."""
    host, colon, port = given.strip().rpartition(":")
    if not colon or (":" in host and not host.endswith("]")):  # no port, or bare IPv6
        host, port = given.strip(), ""
    host = host.strip("[]")
    if not host:
        raise BadInput("--driver-host", f"{given!r}: give HOST or HOST:PORT")
    if not port:
        return host, listening
    if not port.isdigit() or not 0 < int(port) <= 65535:
        raise BadInput("--driver-host", f"{given!r}: the port after ':' must be 1 to 65535")
    return host, int(port)


def driver_address(spark: Any, cluster: ClusterSpec, listening: int) -> tuple[str, int]:
    """Where executors reach the driver's listener, which listens on `listening`."""
    if cluster.driver_host:
        return driver_endpoint(cluster.driver_host, listening)
    if cluster.local:
        return "127.0.0.1", listening
    return (spark.sparkContext.getConf().get("spark.driver.host") or os.uname().nodename,
            listening)
