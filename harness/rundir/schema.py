"""What a record of intervals.jsonl must hold, by schema version, and how a record of an
earlier version this release still reads is brought up to the current one.

The version goes up whenever a field is added that readers must find, or one becomes
required; a field written only where it applies (NotRequired in harness.stats.records, such
as a counters record's `partitions`) leaves it, since every reader of the version already
takes a record without it. A reader takes every version in READABLE. Version 5 (this
release): a counters record carries every counter of harness.stats.recorder.COUNTERS;
version 2 added every counter but `rebalances`, `connect_failed`, `untaken` and `failed`,
version 3 `rebalances`, version 4 `connect_failed`, version 5 `untaken` and `failed` (read as
0 before: the runs that wrote none counted a producer's rate by what it sent, and its failed
sends only among its errors); version 1 files, written before
some counters existed, read the missing ones as 0.
"""

from __future__ import annotations

from typing import Any

from harness.stats.recorder import COUNTERS
from harness.stats.records import RECORDS, SCHEMA_VERSION, required

__all__ = ["READABLE", "REQUIRED", "SCHEMA_VERSION", "problem", "upgrade"]

READABLE = (1, 2, 3, 4, 5)

# Per type, the fields every readable version has: the typed records' required fields.
REQUIRED: dict[str, tuple[str, ...]] = {kind: required(kind) for kind in RECORDS}
# Fields a version added to a type, with what a record of an earlier version reads.
ADDED: dict[int, dict[str, dict[str, Any]]] = {
    2: {"counters": dict.fromkeys((c for c in COUNTERS
                                   if c not in ("rebalances", "connect_failed", "untaken",
                                                 "failed")),
                                  0)},
    3: {"counters": {"rebalances": 0}},
    4: {"counters": {"connect_failed": 0}},
    5: {"counters": {"untaken": 0, "failed": 0}},
}


# Per version and type, every field a record must hold.
_NEEDS = {(version, kind): frozenset(fields) | frozenset(
          name for added_in, more in ADDED.items() if version >= added_in
          for name in more.get(kind, ()))
          for version in READABLE for kind, fields in REQUIRED.items()}


def problem(record: Any) -> str | None:
    """What makes a parsed line unreadable by this release, in a few words; None if
    nothing does. Records of types this release does not know are left to the caller."""
    if not isinstance(record, dict):
        return "not a JSON object"
    version = record.get("v")
    if version not in READABLE:
        return f"schema version {version!r}; this release reads " + \
            ", ".join(map(str, READABLE))
    needs = _NEEDS.get((version, record.get("type")))  # type: ignore[arg-type]
    if needs is None or needs <= record.keys():
        return None
    kind = record["type"]
    missing = [n for n in REQUIRED[kind] if n not in record] or sorted(needs - record.keys())
    return f"a {kind} record without the field {missing[0]!r}"


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """A readable record with what later versions added filled in (in place)."""
    version = record["v"]
    if version < SCHEMA_VERSION:
        for added_in, fields in ADDED.items():
            if version < added_in:
                for name, value in fields.get(record["type"], {}).items():
                    record.setdefault(name, value)
    if "phase" not in record:
        record["phase"] = "measure"
    return record
