"""The open files a process may hold. Every connection a worker opens is one (its socket), so
a run of many threads needs as many in one process: each harness process raises its soft
limit to the hard limit as it starts (a login's soft limit is often 1,024 where the hard one
is far higher), and a run that needs more connections in one process than the hard limit
allows is refused before it starts, in one line saying how many and why."""

from __future__ import annotations

import contextlib
import resource

from harness.errors import BadInput
from harness.modules import transport_class
from harness.plan.run import RunSpec

# Files a process holds besides its workers' connections: the interpreter's, the run
# directory's, the pipes to the controller, the selectors' descriptors.
RESERVE = 64


def raise_limit() -> int:
    """The soft limit raised to the hard one where it is lower; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        # A platform that refuses keeps the soft limit: the run is checked against it.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def check(run: RunSpec) -> None:
    """Refuse a run whose processes need more connections than a process may open: each
    client of a group that talks to a broker holds one at least (a thread, or with --clients
    a client; a group's clients run in each of its --processes; groups on the embedded
    broker open none)."""
    limit = raise_limit()
    if limit == resource.RLIM_INFINITY:
        return
    for group in run.groups:
        if group.embedded:
            continue
        files = transport_class(group.transport).files
        needed = group.streams * files + RESERVE
        if needed > limit:
            flag, what = ("--clients", "clients") if group.clients else ("-nt", "threads")
            each = f" of {files} open files each" if files > 1 else ""
            raise BadInput(flag, f"{group.name}: {group.streams:,} connections{each} in one "
                           f"process, and a process may have {limit:,} open files here "
                           f"({RESERVE} of them kept for the harness's own; RLIMIT_NOFILE, "
                           f"`ulimit -Hn`): spread the {what} over --processes (or nodes)")
