"""Whether a TCP port is free to listen on: the supervisor checks its node's ports with
it, and test nets pick their port blocks with it."""

from __future__ import annotations

import socket


def bindable(port: int, host: str = "127.0.0.1") -> bool:
    """True if nothing listens on ``port`` (SO_REUSEADDR ignores TIME_WAIT leftovers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
