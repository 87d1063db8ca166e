"""`harness package --spark DIR`: what a Spark cluster needs to merge runs or run nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, console


@app.command("package")
def package(
    spark: Annotated[Path, typer.Option(
        "--spark", help="Write the Spark package into this directory: harness.zip "
        "(--py-files), harness-deps/ and harness-deps.tar.gz (--archives) and merge.py.")],
    transport: Annotated[list[str] | None, typer.Option(
        "--transport", "-t", help="Also package this transport's client library, for "
        "distributed runs on it (repeatable; the core ones, stomp and mqtt, always are).")]
        = None,
) -> None:
    """Package this harness for a Spark cluster whose Python has PySpark only: the merge
    (spark-submit merge.py) and distributed runs (harness run --cluster). Prints the
    commands that use it."""
    from harness.distributed.package import DEPS, spark_package
    from harness.merge.submit import SCRIPT

    made = spark_package(spark, transport or [])
    script = spark / "merge.py"
    script.write_text(SCRIPT)
    size = made.archive.stat().st_size
    console.print(
        f"wrote {made.zip} ({made.zip.stat().st_size / 1e3:,.0f} kB), {made.deps}/ and "
        f"{made.archive} ({size / 1e6:,.1f} MB: {len(made.distributions)} packages, "
        f"{(made.deps / 'PACKAGED.txt').read_text().splitlines()[0]}; the executors' Python "
        f"must be the same version on the same platform) and {script}", markup=False)
    console.print(
        "the merge, on any cluster:\n"
        f"  PYTHONPATH={made.deps} spark-submit --master MASTER --py-files {made.zip} "
        f"--archives {made.archive}#{DEPS} --conf spark.executorEnv.PYTHONPATH={DEPS} "
        f"{script} RUN_DIR... --output OUT\n"
        "a distributed run, on executors whose Python has PySpark only:\n"
        f"  harness run ... --cluster MASTER " +
        " ".join(f"--spark-conf {k}={v}" for k, v in made.conf().items()), markup=False)
