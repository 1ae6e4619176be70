"""Pick free local TCP ports so parallel nodes and servers never collide on fixed ones."""

from __future__ import annotations

import os
import random
import socket
import time

#: Below Linux's ephemeral range (32768+): a port picked there can be taken by any outgoing
#: connection between this check and the server's bind.
LOW, HIGH = 20000, 32000


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``n`` distinct ports in [LOW, HIGH) that were free a moment ago.

    All sockets are held open until every port is chosen, so no port is handed out twice;
    a small race with other processes remains, as with any such helper.
    """
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    socks: list[socket.socket] = []
    try:
        for _ in range(50 * n + 100):
            if len(socks) == n:
                return [s.getsockname()[1] for s in socks]
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, rng.randrange(LOW, HIGH)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        raise RuntimeError(f"no {n} free ports in [{LOW}, {HIGH})")
    finally:
        for s in socks:
            s.close()


def free_port(host: str = "127.0.0.1") -> int:
    """Return one free TCP port."""
    return free_ports(1, host)[0]
