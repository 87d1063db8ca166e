"""harness: a load generator for message brokers."""

__version__ = "0.1.0"
