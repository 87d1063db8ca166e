"""The suite's own tables of tests (tests/conftest.py): each name in them is a test or a module
of tests that exists, so that a renamed test does not silently leave its tier, or the
longest-first order, with nothing said."""

from __future__ import annotations

import re

from tests import conftest
from tests.conftest import ROOT

TABLES = ("SERVER_MODULES", "SERVER_TESTS", "SPARK_MODULES", "SPARK_TESTS", "ALONE_MODULES",
          "ALONE_TESTS", "PAIRED_MODULES", "PAIRED_TESTS", "PAIRED_WHOLE", "BROWSER_TESTS",
          "SLOW_TESTS", "LONGEST_FIRST")


def test_every_name_in_the_suites_tables_is_a_test_or_a_module() -> None:
    files = {p.stem: p.read_text() for p in (ROOT / "tests").glob("test_*.py")}
    defined = {name for text in files.values()
               for name in re.findall(r"^def (test_\w+)\(", text, re.MULTILINE)}
    bench = {p.name for p in (ROOT / "contrib" / "bench").glob("*.py")}
    missing = []
    for table in TABLES:
        for name in getattr(conftest, table):
            test, _, param = name.partition("[")
            known = test in files or test in defined
            if param and known:  # the benchmark's parameters are the scripts' names
                known = param.rstrip("]") in bench
            if not known:
                missing.append(f"{table}: {name}")
    assert not missing, missing
    assert len(set(conftest.LONGEST_FIRST)) == len(conftest.LONGEST_FIRST)
