"""A socket read must not map and unmap memory in a measuring process (harness.engine.allocator):
each probe runs in a fresh interpreter, where nothing has moved glibc's thresholds yet."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Reads as asyncio makes them (a 256 KiB buffer shrunk to the 100 bytes that came); prints the
# page faults of 500 of them. Before the reads, per argv[1]: nothing, the harness's setting,
# or a whole in-process run of the harness.
PROBE = """
import resource, socket, sys
how = sys.argv[1]
if how == "set":
    from harness.engine.allocator import keep_freed_memory
    assert keep_freed_memory()
elif how == "run":
    # glibc's default threshold, fixed: what the run imports can no longer raise it, only the
    # cell's own setting can.
    import ctypes
    from harness.engine.allocator import M_MMAP_THRESHOLD
    assert ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 128 * 1024)
    from harness.engine.runner import Controller
    from harness.plan.group import group_spec
    from harness.plan.run import RunSpec, assign_group_names
    groups = [group_spec({"module": "loopback.Sender", "destination": "Q", "rate": 100}),
              group_spec({"module": "loopback.Receiver", "destination": "Q"})]
    assign_group_names(groups)
    Controller(RunSpec(groups=groups, duration=1.0, interval=1.0, drain=0.5,
                       output=sys.argv[2]), lambda view: None, lambda line: None).execute()
a, b = socket.socketpair()
for _ in range(50):
    a.send(b"x" * 100)
    b.recv(262144)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(500):
    a.send(b"x" * 100)
    b.recv(262144)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
ROOT = Path(__file__).resolve().parents[1]


def faults(how: str, tmp_path: Path, env: dict[str, str] | None = None) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE, how, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_socket_reads_keep_their_buffers_in_the_heap(tmp_path):
    from harness.engine.allocator import ENVIRONMENT
    # The mechanism: by default, each read maps a buffer and faults its pages in.
    assert faults("nothing", tmp_path) >= 500
    assert faults("set", tmp_path) < 20
    # contrib/bench gives its bare client loops the same setting through the environment.
    assert faults("nothing", tmp_path, ENVIRONMENT) < 20
    # A harness run sets it in each of its measuring processes.
    assert faults("run", tmp_path) < 20
