"""AsyncRpcClient reads a kept-alive pool's answers directly: a result, CometBFT's error
object, an answer that is not JSON-RPC, and a non-JSON error page each come out as they
do from the httpx path (a result, RpcError, RpcError, httpx.HTTPStatusError)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from memledger.sdk.rpc import AsyncRpcClient, RpcError

#: method -> (HTTP status, answer body)
ANSWERS = {
    "ok": (200, b'{"jsonrpc":"2.0","id":1,"result":{"height":"7"}}'),
    "refused": (500, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,'
                     b'"message":"Internal error","data":"tx already exists in cache"}}'),
    "page": (502, b"<html>bad gateway</html>"),
    "plain": (200, b"hello"),
    "rest": (200, b'{"items":[]}'),
}


async def _server() -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            length = int([line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")][0])
            method = json.loads(await reader.readexactly(length))["method"]
            status, body = ANSWERS[method]
            writer.write(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s"
                         % (status, len(body), body))
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_each_kind_of_answer_comes_out_as_from_httpx() -> None:
    async def go() -> None:
        server = await _server()
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
