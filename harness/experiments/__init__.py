"""Whole experiments: YAML profiles, sweeps, capacity searches, results tables, the ActiveMQ
paper's model, and scenarios (the supermarket supply chain)."""
