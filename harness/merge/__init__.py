"""Merging many nodes' run directories exactly (on Spark, or in one process for one run) and
the report.html drawn from the result."""
