"""Shared helpers for tests. The ones bench/ needs too live in memledger.devtools (re-exported
here: chain, comet, ports, postgres); node.py and workload.py are tests-only."""

from tests.support.ports import free_port, free_ports

__all__ = ["free_port", "free_ports"]
