"""Shared helpers for tests: free ports, a private PostgreSQL server, cometbft lookup."""

from tests.support.ports import free_port, free_ports

__all__ = ["free_port", "free_ports"]
