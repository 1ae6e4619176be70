"""Re-exported from memledger.devtools.ports (shared with bench/)."""

from memledger.devtools.ports import free_port, free_ports

__all__ = ["free_port", "free_ports"]
