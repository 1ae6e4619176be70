"""PlainHttp and AsyncPlainHttp: the same request bytes as httpx, kept-alive
connections, a stale kept connection sent again once, failures raised as the httpx types
the retry policy reads, and the clients using them only where they apply."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from memledger.sdk import AsyncClient, Client
from memledger.sdk.plainhttp import MAX_CONNECTIONS, AsyncPlainHttp, PlainHttp
from memledger.sdk.rpc import RpcClient

Reply = Callable[[bytes, bytes], bytes | None]


def _answer(status: int, body: bytes = b"{}", *, extra: str = "",
            content_type: str = "application/json") -> bytes:
    return (f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


@dataclass
class _Server:
    """A raw HTTP/1.1 server on loopback: records each request's head and body and
    answers what `reply` returns (None: close the connection without answering)."""

    reply: Reply
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)
    connections: int = 0
    close_after_each: bool = False

    def __post_init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, data = data.split(b"\r\n\r\n", 1)
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(data) < length:
                    data += conn.recv(65536)
                body, data = data[:length], data[length:]
                self.requests.append((head, body))
                answer = self.reply(head, body)
                if answer is None:
                    return
                conn.sendall(answer)
                if self.close_after_each:
                    return

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[Callable[..., _Server]]:
    made: list[_Server] = []

    def make(reply: Reply, close_after_each: bool = False) -> _Server:
        made.append(_Server(reply, close_after_each=close_after_each))
        return made[-1]

    yield make
    for s in made:
        s.close()


def test_request_bytes_match_httpx(server: Callable[..., _Server]) -> None:
    srv = server(lambda head, body: _answer(200))
    params: dict[str, Any] = {"wait": "sync", "limit": 5, "rerank": True,
                              "min_score": 0.25, "q": "café & co", "tags": ["a b", "c"]}
    doc = {"tx": "AAE=", "text": "naïve", "n": [1, 2.5, None]}
    plain = PlainHttp(srv.url + "/base", 5.0)
    plain.request("POST", "/v1/txs", params=params, json=doc)
    with httpx.Client(base_url=srv.url + "/base", timeout=5.0) as client:
        client.request("POST", "/v1/txs", params=params, json=doc)
    (mine_head, mine_body), (their_head, their_body) = srv.requests
    assert mine_head.split(b"\r\n")[0] == their_head.split(b"\r\n")[0]
    assert mine_body == their_body
    assert b"content-type: application/json" in mine_head.lower()


def test_connections_are_kept_and_answers_read_whole(server: Callable[..., _Server]) -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n")
    answers = iter([_answer(200, b'{"n": 1}'), chunked, _answer(200, b'{"n": 3}')])
    srv = server(lambda head, body: next(answers))
    plain = PlainHttp(srv.url, 5.0)
    got = [plain.request("GET", "/x").json() for _ in range(3)]
    assert got == [{"n": 1}, {"a": 1}, {"n": 3}]
    assert srv.connections == 1


def test_a_kept_connection_the_server_closed_is_sent_again_once(
        server: Callable[..., _Server]) -> None:
    srv = server(lambda head, body: _answer(200, b'{"ok": true}'), close_after_each=True)
    plain = PlainHttp(srv.url, 5.0)
    assert plain.request("POST", "/a", json={"n": 1}).json() == {"ok": True}
    assert plain.request("POST", "/b", json={"n": 2}).json() == {"ok": True}
    assert [body for _, body in srv.requests] == [b'{"n":1}', b'{"n":2}']
    assert srv.connections == 2


def test_no_answer_on_a_new_connection_is_a_protocol_error(
        server: Callable[..., _Server]) -> None:
    srv = server(lambda head, body: None)
    with pytest.raises(httpx.RemoteProtocolError):
        PlainHttp(srv.url, 5.0).request("POST", "/a", json={})
    assert len(srv.requests) == 1  # not sent twice: it may have reached a handler


def test_failures_are_the_httpx_types(server: Callable[..., _Server]) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(httpx.ConnectError):
        PlainHttp(f"http://127.0.0.1:{port}", 5.0).request("GET", "/")
    silent = server(lambda head, body: (threading.Event().wait(2), None)[1])
    with pytest.raises(httpx.ReadTimeout):
        PlainHttp(silent.url, 0.2).request("GET", "/slow")


def test_an_error_answer_carries_its_request_and_headers(
        server: Callable[..., _Server]) -> None:
    srv = server(lambda head, body: _answer(503, b'{"name": "overloaded"}',
                                            extra="Retry-After: 3\r\n",
                                            content_type="application/problem+json"))
    resp = PlainHttp(srv.url, 5.0).request("GET", "/v1/memories", params={"q": "x"})
    assert resp.status_code == 503 and resp.headers["retry-after"] == "3"
    assert str(resp.request.url) == f"{srv.url}/v1/memories?q=x"
    with pytest.raises(httpx.HTTPStatusError):
        resp.raise_for_status()


def test_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert PlainHttp.serves("http://127.0.0.1:1", None)
    assert not PlainHttp.serves("https://node.example", None)
    assert not PlainHttp.serves("http://127.0.0.1:1", httpx.MockTransport(lambda r: r))
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert not PlainHttp.serves("http://127.0.0.1:1", None)
    with Client("http://127.0.0.1:1") as behind_proxy:
        assert behind_proxy._plain is None


def test_clients_use_it_for_plain_http(server: Callable[..., _Server],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    status = (b'{"chain_id": "c", "height": 1, "app_version": 1, "node_id": "n", '
              b'"latest_block_time": null, "catching_up": false}')
    rest = server(lambda head, body: _answer(200, status))
    rpc = server(lambda head, body: _answer(200, b'{"jsonrpc": "2.0", "id": 1, '
                                             b'"result": {"node_info": {}}}'))
    with Client(rest.url) as client, RpcClient(rpc.url) as rpc_client:
        assert client._plain is not None and rpc_client._plain is not None
        client._request("GET", "/v1/status")
        assert rpc_client.status() == {"node_info": {}}
    assert rest.requests[0][0].startswith(b"GET /v1/status HTTP/1.1")
    assert rpc.requests[0][0].startswith(b"POST / HTTP/1.1")
    with Client(rest.url, transport=httpx.MockTransport(lambda r: httpx.Response(200))) as mock:
        assert mock._plain is None


def test_async_request_bytes_and_answers_match_httpx(server: Callable[..., _Server]) -> None:
    answers = iter([_answer(200, b'{"n": 1}'), _answer(200, b'{"n": 1}'),
                    _answer(503, b'{"name": "overloaded"}', extra="Retry-After: 2\r\n",
                            content_type="application/problem+json")])
    srv = server(lambda head, body: next(answers))
    params: dict[str, Any] = {"wait": "sync", "limit": 5, "q": "café & co",
                              "tags": ["a b", "c"]}
    doc = {"tx": "AAE=", "text": "naïve"}

    async def go() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        plain = AsyncPlainHttp(srv.url + "/base", 5.0)
        mine = await plain.request("POST", "/v1/txs", params=params, json=doc)
        async with httpx.AsyncClient(base_url=srv.url + "/base", timeout=5.0) as client:
            theirs = await client.request("POST", "/v1/txs", params=params, json=doc)
        shed = await plain.request("GET", "/v1/memories")
        await plain.aclose()
        return mine, theirs, shed
    mine, theirs, shed = asyncio.run(go())
    (mine_head, mine_body), (their_head, their_body), _ = srv.requests
    assert mine_head.split(b"\r\n")[0] == their_head.split(b"\r\n")[0]
    assert mine_body == their_body
    assert mine.json() == theirs.json() == {"n": 1}
    assert shed.status_code == 503 and shed.headers["retry-after"] == "2"
    assert str(shed.request.url) == f"{srv.url}/base/v1/memories"
    assert srv.connections == 2  # plain's two requests on one kept connection


def test_async_connections_follow_the_running_loop(server: Callable[..., _Server]) -> None:
    srv = server(lambda head, body: _answer(200, b'{"ok": true}'))
    plain = AsyncPlainHttp(srv.url, 5.0)
    for _ in range(2):  # a second loop cannot use the first loop's streams
        assert asyncio.run(plain.request("GET", "/a")).json() == {"ok": True}
    assert srv.connections == 2


def test_async_failures_are_the_httpx_types(server: Callable[..., _Server]) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(httpx.ConnectError):
        asyncio.run(AsyncPlainHttp(f"http://127.0.0.1:{port}", 5.0).request("GET", "/"))
    silent = server(lambda head, body: (threading.Event().wait(2), None)[1])
    with pytest.raises(httpx.ReadTimeout):
        asyncio.run(AsyncPlainHttp(silent.url, 0.2).request("GET", "/slow"))


def test_the_async_client_uses_it_for_plain_http(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert AsyncClient("http://127.0.0.1:1")._plain is not None
    mock = httpx.MockTransport(lambda r: httpx.Response(200))
    assert AsyncClient("http://127.0.0.1:1", transport=mock)._plain is None
    assert AsyncClient("https://node.example")._plain is None


def test_async_requests_at_once_are_bounded(server: Callable[..., _Server]) -> None:
    def slow(head: bytes, body: bytes) -> bytes:
        threading.Event().wait(0.05)
        return _answer(200, b'{"ok": true}')
    srv = server(slow)
    plain = AsyncPlainHttp(srv.url, 10.0, keep=MAX_CONNECTIONS)

    async def go() -> list[httpx.Response]:
        return await asyncio.gather(*(plain.request("GET", f"/{i}")
                                      for i in range(MAX_CONNECTIONS + 50)))
    answers = asyncio.run(go())
    assert all(a.status_code == 200 for a in answers)
    assert len(srv.requests) == MAX_CONNECTIONS + 50
    assert srv.connections <= MAX_CONNECTIONS  # the rest waited for a kept connection
