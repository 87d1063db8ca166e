"""Helpers a transport may use and none must: a socket-level framing base, a client loop
driven by the worker's own thread, an inbox for pushed deliveries, microsecond waits,
reconnection with back-off, an asyncio loop turned by hand. Each imports only the interface."""
