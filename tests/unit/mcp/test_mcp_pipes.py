"""stdio on the event loop (memledger.mcp.pipes): lines in and out of real pipes, the fds
claimed and given back, and a server driven by the official MCP client over it, with
the fallback to the SDK's transport caught if it is what runs."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver import MCPServer

from memledger.mcp.pipes import PIPES, claimed_pipes, lowlevel_server

REPO = Path(__file__).parents[3]

SERVER = """
import asyncio, sys
from mcp.server.mcpserver import MCPServer
from memledger.mcp.pipes import serve

server = MCPServer("echo")

@server.tool()
def echo(text: str) -> str:
    print("a stray print that must not reach the wire")
    return text[::-1]

ran = asyncio.run(serve(server))
open(sys.argv[1], "w").write(ran)
"""


def test_the_sdk_still_has_the_low_level_server() -> None:
    # when this fails, `serve` falls back to the SDK's slower stdio: look at pipes.py
    assert lowlevel_server(MCPServer("x")) is not None
    assert lowlevel_server(object()) is None


def test_lines_in_and_out_and_the_fds_come_back() -> None:
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    before = [os.fstat(fd).st_ino for fd in (in_r, out_w)]

    async def run() -> None:
        async with claimed_pipes(in_r, out_w) as pipes:
            assert pipes is not None
            lines, out = pipes
            # while claimed, the fds no longer lead to the wire
            assert [os.fstat(fd).st_ino for fd in (in_r, out_w)] != before
            def feed() -> None:  # more than a pipe holds: written while it is read
                with os.fdopen(in_w, "wb") as pipe:
                    pipe.write(b'{"a": 1}\n' + b"x" * 200_000 + b"\n\xff\n")

            fed = asyncio.create_task(asyncio.to_thread(feed))
            got = [line async for line in lines]
            await fed
            assert got == ['{"a": 1}\n', "x" * 200_000 + "\n", "\ufffd\n"]
            await out.write("answer\n")
            await out.flush()

    asyncio.run(run())
    assert [os.fstat(fd).st_ino for fd in (in_r, out_w)] == before
    assert os.read(out_r, 100) == b"answer\n"
    for fd in (in_r, out_r, out_w):
        os.close(fd)


def test_a_regular_file_is_not_claimed() -> None:
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout:
        async def run() -> None:
            async with claimed_pipes(stdin.fileno(), stdout.fileno()) as pipes:
                assert pipes is None
        asyncio.run(run())


def test_the_official_client_over_the_pipes(tmp_path: Path) -> None:
    ran = tmp_path / "transport"
    params = StdioServerParameters(command=sys.executable,
                                   args=["-c", SERVER, str(ran)],
                                   env=dict(os.environ, PYTHONPATH=str(REPO)))

    async def run() -> None:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                big = "memory " * 20_000
                answers = await asyncio.gather(*(
                    session.call_tool("echo", {"text": f"{i} {big}"}) for i in range(8)))
                for i, result in enumerate(answers):
                    assert not result.is_error
                    assert getattr(result.content[0], "text", "") == f"{i} {big}"[::-1]

    asyncio.run(run())
    assert ran.read_text() == PIPES
