"""PostPool: kept-alive POSTs, both answer framings, a stale kept connection retried,
and cometbft unreachable raised as httpx's ConnectError; and AsyncRpcClient's reading
of the answers it gets through one."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from memledger.sdk.rpc import AsyncRpcClient, RpcError
from memledger.sdk.rpc_pool import PostPool


async def _read_body(reader: asyncio.StreamReader) -> bytes | None:
    """One request's body, or None once the client has closed the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = int([line.split(b":")[1] for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length")][0])
    return await reader.readexactly(length)


async def _server(handle_count: list[int], close_after: int | None = None
                  ) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handle_count[0] += 1
        served = 0
        while True:
            body = await _read_body(reader)
            if body is None:
                break
            if body.startswith(b"chunk"):
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))
            await writer.drain()
            served += 1
            if close_after is not None and served >= close_after:
                break
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_posts_reuse_one_connection_and_read_both_framings() -> None:
    async def go() -> None:
        count = [0]
        server = await _server(count)
        port = server.sockets[0].getsockname()[1]
        pool = PostPool(f"http://127.0.0.1:{port}/")
        assert await pool.post(b'{"a": 1}') == (200, b'{"a": 1}')
        assert await pool.post(b"chunked please") == (200, b"abcde")
        assert count[0] == 1  # one kept-alive connection for both
        await pool.aclose()
        server.close()
    asyncio.run(go())


def test_a_connection_the_server_closed_while_idle_is_retried_on_a_new_one() -> None:
    async def go() -> None:
        count = [0]
        server = await _server(count, close_after=1)
        port = server.sockets[0].getsockname()[1]
        pool = PostPool(f"http://127.0.0.1:{port}/")
        for i in range(3):
            assert await pool.post(b"x%d" % i) == (200, b"x%d" % i)
            await asyncio.sleep(0.01)  # let the server's close arrive
        assert count[0] == 3
        await pool.aclose()
        server.close()
    asyncio.run(go())


def test_nothing_listening_is_a_connect_error() -> None:
    async def go() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(httpx.ConnectError):
            await PostPool(f"http://127.0.0.1:{port}/").post(b"{}")
    asyncio.run(go())


#: method -> (HTTP status, answer body)
ANSWERS = {
    "ok": (200, b'{"jsonrpc":"2.0","id":1,"result":{"height":"7"}}'),
    "refused": (500, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,'
                     b'"message":"Internal error","data":"tx already exists in cache"}}'),
    "page": (502, b"<html>bad gateway</html>"),
    "plain": (200, b"hello"),
    "rest": (200, b'{"items":[]}'),
}


async def _answering_server() -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await _read_body(reader)) is not None:
            status, body = ANSWERS[json.loads(request)["method"]]
            writer.write(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s"
                         % (status, len(body), body))
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_async_rpc_client_reads_each_kind_of_answer_as_httpx_did() -> None:
    """AsyncRpcClient reads the pool's answers directly: a result, CometBFT's error
    object, an answer that is not JSON-RPC, and a non-JSON error page each come out as
    from the httpx path (a result, RpcError, RpcError, httpx.HTTPStatusError)."""
    async def go() -> None:
        server = await _answering_server()
        client = AsyncRpcClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        try:
            assert await client.call("ok") == {"height": "7"}
            with pytest.raises(RpcError) as refused:
                await client.call("refused")
            assert refused.value.code == -32603
            assert refused.value.data == "tx already exists in cache"
            with pytest.raises(httpx.HTTPStatusError):
                await client.call("page")
            for method in ("plain", "rest"):
                with pytest.raises(RpcError, match="not a JSON-RPC answer"):
                    await client.call(method)
        finally:
            await client.aclose()
            server.close()
            await server.wait_closed()
    asyncio.run(go())
