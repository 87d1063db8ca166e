#!/usr/bin/env python3
"""The multi-node merge as a Spark application, for any cluster:

    spark-submit --master yarn --py-files harness.zip contrib/spark/merge.py \
        hdfs:///runs/node1/20261122T101500Z-run hdfs:///runs/node2/20261122T101500Z-run \
        --output hdfs:///runs/merged

harness.zip is the harness package (`cd <checkout> && zip -r harness.zip harness modules`);
the executors also need the hdrhistogram, numpy and orjson packages. Inputs and output may be any
path Spark reads and writes (local, hdfs://, s3a://). `harness merge` runs the same job on an
embedded local Spark.
"""

from __future__ import annotations

import argparse
import sys

from harness.merge.spark import MergeError, merge


def main() -> int:
    parser = argparse.ArgumentParser(description="Merge harness run directories exactly.")
    parser.add_argument("run_dirs", nargs="+", help="run directories of the nodes of one run")
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--sweep", action="store_true",
                        help="the inputs are several runs (a sweep): merge each on its own")
    parser.add_argument("--skew-warn-ms", type=float, default=1.0,
                        help="warn when a node's clock offset exceeds this")
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("harness merge").getOrCreate()
    try:
        merged = merge(spark, args.run_dirs, args.output, args.sweep, args.skew_warn_ms / 1000)
    except MergeError as exc:
        for problem in exc.problems:
            print(f"harness merge: error: {problem}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    for warning in merged.warnings:
        print(f"harness merge: warning: {warning}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
