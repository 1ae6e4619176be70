"""Requests to a plain-http node over kept-alive connections, without httpx's per-request
cost; the answers are httpx.Response objects, so everything above them is unchanged.

Why: an SDK `submit` spent ~1 ms of the agent's CPU (~2.5 ms with the AsyncClient), most
of it inside httpx: building the request (three URL parses, cookies, auth and redirect
layers), its connection pool and h11's pure-Python parsing. An agent host with many
agents, or a node sharing its cores with them, pays that per call. The blocking clients
send through the standard library's http.client (PlainHttp), the AsyncClient through the
asyncio streams the REST process already uses to reach cometbft (AsyncPlainHttp over
memledger.sdk.rpc_pool.PostPool): ~0.7 ms per submit either way (BENCHMARKS.md §15,
"The SDK's own cost per request").

`PlainHttp.serves()` says when they apply: an http:// base URL, no custom transport
(tests and embedders pass one) and no http proxy in the environment (httpx honours
HTTP_PROXY, ALL_PROXY and NO_PROXY; with one set, httpx decides). Everything else
(https, proxies, streamed downloads) stays with httpx. Transport failures are raised as
the httpx exceptions they would have been, because the retry policy
(memledger.sdk.retry) decides by those types what may be sent again.
"""

from __future__ import annotations

import asyncio
import http.client
import json as jsonlib
import threading
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from memledger.sdk.rpc_pool import PostPool

__all__ = ["AsyncPlainHttp", "PlainHttp"]

_DEFAULT = object()
#: requests one AsyncPlainHttp has on the wire at once (httpx's default connection limit)
MAX_CONNECTIONS = 100
#: What a kept-alive connection raises when the server had closed it before any answer:
#: on a reused connection the request is sent again once, on a new one.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class PlainHttp:
    """Blocking requests to one http:// origin; safe to share between threads (each
    request holds one connection; at most `keep` idle ones are kept)."""

    def __init__(self, base_url: str, timeout: float | None, *, keep: int = 64) -> None:
        self.host, self.port, self.prefix, self._origin = _origin(base_url, "PlainHttp")
        self.timeout = timeout
        self.keep = keep
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    @staticmethod
    def serves(base_url: str, transport: object | None) -> bool:
        """True where requests may skip httpx: plain http, no transport, no proxy."""
        parts = urlsplit(base_url)
        if transport is not None or parts.scheme != "http" or not parts.hostname:
            return False
        # With a proxy set for http at all, httpx decides (it also reads NO_PROXY).
        return not {"http", "all"} & urllib.request.getproxies_environment().keys()

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                json: Any = None, content: bytes | None = None,
                headers: Mapping[str, str] | None = None,
                timeout: Any = _DEFAULT) -> httpx.Response:
        """Send one request and read its whole answer."""
        target, body, send_headers = _prepared(self.prefix, path, params, json, content,
                                               headers)
        wait = self.timeout if timeout is _DEFAULT else timeout
        if isinstance(wait, httpx.Timeout):
            wait = wait.read
        conn, reused = self._take(wait)
        while True:
            try:
                status, answer, got = self._exchange(conn, method, target, body,
                                                     send_headers)
                break
            except _Stale:
                if not reused:  # a new connection that answered nothing: not sent again
                    raise self._failure("the connection closed before an answer", method,
                                        target, httpx.RemoteProtocolError) from None
                conn, reused = self._fresh(wait), False
        if got.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return _response(status, got.getheaders(), answer, method, self._origin + target)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _exchange(self, conn: http.client.HTTPConnection, method: str, target: str,
                  body: bytes | None, headers: dict[str, str]
                  ) -> tuple[int, bytes, http.client.HTTPResponse]:
        """One request and its whole answer; the connection is closed on any failure."""
        answered = False
        try:
            conn.request(method, target, body=body, headers=headers)
            got = conn.getresponse()
            answered = True
            return got.status, got.read(), got
        except BaseException as exc:
            conn.close()
            if not answered and isinstance(exc, _STALE):
                raise _Stale from None
            if isinstance(exc, TimeoutError):
                raise self._failure(str(exc) or "timed out", method, target,
                                    httpx.ReadTimeout) from exc
            if isinstance(exc, http.client.HTTPException):
                raise self._failure(str(exc) or type(exc).__name__, method, target,
                                    httpx.RemoteProtocolError) from exc
            if isinstance(exc, OSError):
                raise self._failure(str(exc) or type(exc).__name__, method, target,
                                    httpx.ReadError) from exc
            raise

    def _take(self, timeout: float | None) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            return self._fresh(timeout), False
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, True

    def _fresh(self, timeout: float | None) -> http.client.HTTPConnection:
        """A new connection, connected here so that failing to connect is told apart
        from failing later (only the first may always be sent again)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.connect()
        except TimeoutError as exc:
            conn.close()
            raise self._failure(f"connecting: {exc}", "CONNECT", "/",
                                httpx.ConnectTimeout) from exc
        except OSError as exc:
            conn.close()
            raise self._failure(f"connecting: {exc}", "CONNECT", "/",
                                httpx.ConnectError) from exc
        return conn

    def _failure(self, text: str, method: str, target: str,
                 kind: type[httpx.TransportError]) -> httpx.TransportError:
        request = httpx.Request("GET" if method == "CONNECT" else method,
                                self._origin + target)
        return kind(f"{self.host}:{self.port}: {text}", request=request)

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.keep:
                self._idle.append(conn)
                return
        conn.close()


class AsyncPlainHttp:
    """PlainHttp for asyncio: kept-alive connections on the running loop's streams
    (memledger.sdk.rpc_pool.PostPool, the REST process's transport to cometbft)."""

    def __init__(self, base_url: str, timeout: float | None, *, keep: int = 64) -> None:
        self.host, self.port, self.prefix, self._origin = _origin(base_url, "AsyncPlainHttp")
        self._host_line = f"Host: {self._origin.removeprefix('http://')}\r\n"
        self.timeout = timeout
        self.keep = keep
        self._pools: tuple[asyncio.AbstractEventLoop, PostPool, asyncio.Semaphore] | None = None

    def _pool(self) -> tuple[PostPool, asyncio.Semaphore]:
        """The pool of the running loop (streams belong to the loop that opened them),
        and the bound on its requests at once: httpx's own, MAX_CONNECTIONS, so that
        a caller gathering a thousand requests does not open a thousand sockets."""
        loop = asyncio.get_running_loop()
        if self._pools is None or self._pools[0] is not loop:
            if self._pools is not None:
                self._pools[1].close_idle()
            self._pools = (loop, PostPool(self._origin + "/", timeout=self.timeout,
                                          keep=self.keep), asyncio.Semaphore(MAX_CONNECTIONS))
        return self._pools[1], self._pools[2]

    async def request(self, method: str, path: str, *,
                      params: Mapping[str, Any] | None = None, json: Any = None,
                      content: bytes | None = None,
                      headers: Mapping[str, str] | None = None) -> httpx.Response:
        """Send one request and read its whole answer."""
        target, body, send_headers = _prepared(self.prefix, path, params, json, content,
                                               headers)
        lines = [f"{method} {target} HTTP/1.1\r\n", self._host_line]
        lines += [f"{name}: {value}\r\n" for name, value in send_headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}\r\n")
        lines.append("\r\n")
        raw = "".join(lines).encode("latin-1") + (body or b"")
        pool, turns = self._pool()
        try:
            async with turns:
                answer = await pool.send(raw)
        except httpx.TransportError as exc:
            raise type(exc)(f"{self._origin}: {exc}",
                            request=httpx.Request(method, self._origin + target)) from None
        return _response(answer.status, answer.headers, answer.body, method,
                         self._origin + target)

    async def aclose(self) -> None:
        if self._pools is not None:
            await self._pools[1].aclose()
            self._pools = None


def _origin(base_url: str, who: str) -> tuple[str, int, str, str]:
    """(host, port, path prefix, origin URL) of a plain http:// base URL."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{who} speaks plain http only, not {base_url!r}")
    host, port = parts.hostname, parts.port or 80
    shown = f"[{host}]" if ":" in host else host  # an IPv6 literal
    return host, port, parts.path.rstrip("/"), f"http://{shown}:{port}"


def _prepared(prefix: str, path: str, params: Mapping[str, Any] | None, json: Any,
              content: bytes | None, headers: Mapping[str, str] | None
              ) -> tuple[str, bytes | None, dict[str, str]]:
    """(request target, body, headers) as httpx would send them."""
    target = (prefix + path) or "/"
    if params:
        query = str(httpx.QueryParams(params))  # encoded exactly as httpx would
        if query:
            target = f"{target}?{query}"
    send_headers = {"Accept": "*/*", "Connection": "keep-alive"}
    body = content
    if json is not None:
        # httpx's own JSON body encoding, so the bytes on the wire are the same
        body = jsonlib.dumps(json, ensure_ascii=False, separators=(",", ":"),
                             allow_nan=False).encode()
        send_headers["Content-Type"] = "application/json"
    if headers:
        send_headers.update(headers)
    return target, body, send_headers


def _response(status: int, headers: list[tuple[str, str]], body: bytes, method: str,
              url: str) -> httpx.Response:
    """The answer as httpx would have given it. An error answer carries its request, as
    httpx's do (raise_for_status needs it); building one parses the URL again, so the
    usual answer goes without."""
    request = httpx.Request(method, url) if status >= 400 else None
    return httpx.Response(status, headers=headers, content=body, request=request)


class _Stale(Exception):
    """A kept connection the server had closed: the request reached no handler."""
