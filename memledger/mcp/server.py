"""Wiring: the MCPServer with its tools, instructions and prompt, on stdio or streamable
HTTP (loopback by default; any other address only behind a bearer token)."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from memledger.mcp.guide import GUIDE, INSTRUCTIONS, with_operator_text
from memledger.mcp.operator import OperatorTools, operator_functions
from memledger.mcp.tools import Tools, tool_functions

log = logging.getLogger(__name__)
SERVER_NAME = "memledger"
MCP_PATH = "/mcp"


def build_server(tools: Tools, operator_text: str = "",
                 operator: OperatorTools | None = None) -> MCPServer[Any]:
    """The server: every tool of `tools` (and `operator`'s governance tools when given),
    the instructions and the `memory_guide` prompt."""
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME, title="memledger shared memory",
        instructions=with_operator_text(INSTRUCTIONS, operator_text),
        version=_version(), log_level="WARNING", middleware=[OneLineErrors()])
    functions = tool_functions(tools)
    if operator is not None:
        functions += operator_functions(operator)
    for name, fn, notes in functions:
        server.add_tool(fn, name=name, annotations=notes, structured_output=False)
    guide = with_operator_text(GUIDE, operator_text)

    @server.prompt(name="memory_guide",
                   description="How and when to use memledger memory (recall, remember, "
                               "statuses, provenance).")
    def memory_guide() -> str:
        return guide

    return server


_NAMED = re.compile(r"[a-z_]+: [^\n]*")
_FIELD_ERROR = re.compile(r"validation errors? for \w+\n(?P<field>[^\n]+)\n\s+(?P<why>[^\[\n]+)")


class OneLineErrors:
    """Every tool error as `name: one line`: the tools' own already are; the SDK's (bad
    arguments, an unknown tool) are several lines of pydantic text, rewritten here."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if getattr(ctx, "method", "") != "tools/call":
            return result
        if isinstance(result, CallToolResult):  # a model before serialising, if ever
            result = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        if not isinstance(result, dict) or not result.get("isError"):
            return result
        text = "".join(str(c.get("text", "")) for c in result.get("content") or []
                       if isinstance(c, dict))
        if _NAMED.fullmatch(text):
            return result
        return {**result, "content": [{"type": "text", "text": sdk_error_line(text)}]}


def sdk_error_line(text: str) -> str:
    """The SDK's error text as `name: reason` on one line."""
    found = _FIELD_ERROR.search(text)
    if found:
        return f"invalid_arguments: {found['field'].strip()}: {found['why'].strip()}"
    if text.startswith("Unknown tool"):
        return f"unknown_tool: {' '.join(text.split())}"
    lines = [ln for ln in text.splitlines() if "errors.pydantic.dev" not in ln]
    return "tool_error: " + " ".join(" ".join(lines).split())[:500]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memledger")
    except PackageNotFoundError:
        return "0.0.0"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """ASGI middleware: every request needs `Authorization: Bearer <token>` (compared in
    constant time). The token is never logged; a refusal logs only the client address."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                given = value[7:].strip()
        if not hmac.compare_digest(given, self._token):
            log.warning("refused an MCP request without a valid bearer token from %s",
                        (scope.get("client") or ("?",))[0])
            body = json.dumps({"error": "unauthorized",
                               "detail": "a valid bearer token is required"}).encode()
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


async def serve_stdio(server: MCPServer[Any], tools: Tools) -> None:
    """stdio on the event loop (memledger.mcp.pipes), else the SDK's own transport."""
    from memledger.mcp.pipes import serve

    try:
        await serve(server)
    finally:
        await tools.ledger.aclose()


async def serve_http(server: MCPServer[Any], tools: Tools, host: str, port: int,
                     token: str | None) -> None:
    """Streamable HTTP at http://host:port/mcp; `token` required of every request when
    given (the caller refuses a non-loopback host without one)."""
    import uvicorn

    app: Any = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    if token is not None:
        app = BearerAuth(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                            access_log=False)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await tools.ledger.aclose()
