"""The multi-node merge as a Spark application (contrib/spark/merge.py, or the merge.py
`harness package --spark DIR` writes), for spark-submit on any cluster: the same job as
`harness merge`, on the session spark-submit made."""

from __future__ import annotations

import argparse
import sys

# The script spark-submit is given: the application is in the harness it ships (--py-files).
SCRIPT = """#!/usr/bin/env python3
\"\"\"The harness's multi-node merge, for spark-submit (harness.merge.submit).\"\"\"
import sys

from harness.merge.submit import main

if __name__ == "__main__":
    sys.exit(main())
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="merge.py",
                                     description="Merge harness run directories exactly.")
    parser.add_argument("run_dirs", nargs="+", help="run directories of the nodes of one run")
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--sweep", action="store_true",
                        help="the inputs are several runs (a sweep): merge each on its own")
    parser.add_argument("--skew-warn-ms", type=float, default=1.0,
                        help="warn when a node's clock offset exceeds this")
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    from harness.errors import BadInput
    from harness.merge.spark import MergeError, merge

    spark = SparkSession.builder.appName("harness merge").getOrCreate()
    try:
        merged = merge(spark, args.run_dirs, args.output, args.sweep, args.skew_warn_ms / 1000)
    except MergeError as exc:
        for problem in exc.problems:
            print(f"harness merge: error: {problem}", file=sys.stderr)
        return 2
    except BadInput as exc:
        print(f"harness merge: error: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    for warning in merged.warnings:
        print(f"harness merge: warning: {warning}", file=sys.stderr)
    return 0
