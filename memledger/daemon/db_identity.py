"""Whether two database URLs name the same database, however each is spelled.

`projection rebuild` must lock the node's home when it rebuilds the node's own
projection: the running app writes it every block. Comparing URL strings missed the same
database spelled another way (`./data/projection.db`, a symlink, `localhost` for
`127.0.0.1` or another name that resolves to the same server, the default port written
out, another driver), and the rebuild then ran beside the node's writer without the lock.
"""

from __future__ import annotations

import ipaddress
import os
import socket

from sqlalchemy.engine import URL, make_url

from memledger.sqlite_uri import sqlite_path

_DEFAULT_PORTS = {"postgresql": 5432}
_LOOPBACK = {"", "localhost", "127.0.0.1", "::1", "[::1]"}


def _server(url: URL) -> tuple[str, str, int | None, str]:
    """Backend, host, port and database, each in one spelling."""
    backend = url.get_backend_name()
    given = url.host or url.query.get("host") or ""
    host = (given if isinstance(given, str) else given[0]).lower()
    if host in _LOOPBACK or host.startswith("/"):
        host = "localhost"  # the local server, by TCP or by a socket
    port = url.port or _DEFAULT_PORTS.get(backend)
    return backend, host, port, url.database or ""


def _addresses(host: str) -> set[str]:
    """The addresses a host name resolves to, with every loopback one as `localhost` (an
    alias in /etc/hosts names the node's own server); the name itself when it does not
    resolve."""
    if host == "localhost":
        return {host}
    try:
        found = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return {host}
    return {"localhost" if ipaddress.ip_address(a.split("%")[0]).is_loopback else a
            for a in found}


def _same_server(a: URL, b: URL) -> bool:
    backend_a, host_a, port_a, db_a = _server(a)
    backend_b, host_b, port_b, db_b = _server(b)
    if (backend_a, port_a, db_a) != (backend_b, port_b, db_b):
        return False
    return host_a == host_b or bool(_addresses(host_a) & _addresses(host_b))


def same_database(a: str, b: str) -> bool:
    """True when `a` and `b` name one database (a SQLite file by its real path, a server
    database by backend, host, port and name: the user and driver do not change it)."""
    if a == b:
        return True
    path_a, path_b = sqlite_path(a), sqlite_path(b)
    if path_a is not None or path_b is not None:
        if path_a is None or path_b is None:
            return False
        return os.path.realpath(path_a) == os.path.realpath(path_b)
    return _same_server(make_url(a), make_url(b))
