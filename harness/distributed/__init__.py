"""A run fanned out to many client machines as one Spark barrier stage, shown live and merged
at the end (`harness run --cluster MASTER --nodes N`)."""
