#!/usr/bin/env python3
"""The multi-node merge as a Spark application, for any cluster (harness.merge.submit).

What the cluster needs is made by `harness package --spark DIR` (on a machine with the
harness installed): DIR/harness.zip (the harness, for --py-files), DIR/harness-deps/ and
DIR/harness-deps.tar.gz (the packages it imports, for a Python with PySpark only) and
DIR/merge.py (this script). It prints the command; for a standalone cluster:

    harness package --spark pkg
    PYTHONPATH=pkg/harness-deps spark-submit --master spark://HOST:7077 \
        --py-files pkg/harness.zip --archives pkg/harness-deps.tar.gz#harness-deps \
        --conf spark.executorEnv.PYTHONPATH=harness-deps \
        pkg/merge.py NODE_RUN_DIR... --output OUT

Inputs and output may be any path Spark reads and writes (hdfs://, s3a://, or a directory
every machine of the cluster mounts). `harness merge` runs the same job on an embedded
local Spark.
"""

import sys

from harness.merge.submit import main

if __name__ == "__main__":
    sys.exit(main())
