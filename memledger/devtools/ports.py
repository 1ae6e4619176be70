"""Pick free local TCP ports so parallel nodes and servers never collide on fixed ones."""

from __future__ import annotations

import socket


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``n`` distinct ports that were free a moment ago.

    All sockets are held open until every port is chosen, so the OS cannot hand out the
    same port twice; a small race with other processes remains, as with any such helper.
    """
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = "127.0.0.1") -> int:
    """Return one free TCP port."""
    return free_ports(1, host)[0]
