"""Measurement: HDR histograms, per-thread recorders, delivery verification, and the merged
interval figures every output reports."""
