"""The thresholds' verdicts as JUnit XML (--junit): one test case per threshold, in the shape
Jenkins, GitLab and GitHub read (a testsuites root, a testsuite, testcases with a failure
element where missed)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from datetime import UTC
from pathlib import Path
from typing import Any


def junit_tree(summary: dict[str, Any], run_id: str) -> ET.ElementTree:
    verdict = summary.get("slo") or {"thresholds": []}
    cases = verdict["thresholds"]
    failures = sum(not v["passed"] for v in cases)
    seconds = f"{summary.get('measured_seconds', 0.0):.3f}"
    root = ET.Element("testsuites", name="harness", tests=str(len(cases)),
                      failures=str(failures), errors="0", time=seconds)
    suite = ET.SubElement(root, "testsuite", name=f"harness run {run_id}",
                          tests=str(len(cases)), failures=str(failures), errors="0",
                          skipped="0", time=seconds)
    if summary.get("start"):
        from datetime import datetime
        suite.set("timestamp", datetime.fromtimestamp(summary["start"], UTC)
                  .strftime("%Y-%m-%dT%H:%M:%S"))
    for v in cases:
        case = ET.SubElement(suite, "testcase", classname="harness.slo", name=v["threshold"],
                             time=seconds)
        detail = f"measured {v['shown']}"
        if "intervals_judged" in v:
            detail += f"; missed in {v['intervals_missed']} of {v['intervals_judged']} " \
                      "intervals"
        if not v["passed"]:
            why = "not measured" if v["span_passed"] is None else "threshold missed"
            failure = ET.SubElement(case, "failure", message=f"{why}: {detail}",
                                    type="threshold")
            failure.text = detail
        else:
            ET.SubElement(case, "system-out").text = detail
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: Path, summary: dict[str, Any], run_id: str) -> None:
    """Written whole or not at all: a CI job must never read half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    junit_tree(summary, run_id).write(temporary, encoding="utf-8", xml_declaration=True)
    os.replace(temporary, path)
