"""Configuration snippets that add memledger to agent hosts (`memledger mcp config`)."""

from __future__ import annotations

import json
import shlex


def _server(exe: str, key: str) -> dict[str, object]:
    return {"command": exe, "args": ["mcp", "--key", key]}


def _hooks(python: str) -> dict[str, object]:
    # the light module, not `memledger hook session-start`: it runs before every session
    start = f"{shlex.quote(python)} -m memledger.mcp.hook session-start"
    return {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": start}]}]}}


def snippet(client: str, exe: str, key: str, port: int, python: str = "python3") -> str:
    """The text to paste (or run) for ``client``; the comments say where it goes."""
    servers = json.dumps({"mcpServers": {"memledger": _server(exe, key)}}, indent=2)
    if client == "claude-code":
        add = (f"claude mcp add memledger -- {shlex.quote(exe)} mcp --key "
               f"{shlex.quote(key)}")
        return (f"# add the server (run once):\n{add}\n"
                "# optional, recall at every session start: merge into "
                ".claude/settings.json\n" + json.dumps(_hooks(python), indent=2))
    if client == "claude-desktop":
        return ("# merge into claude_desktop_config.json (Settings > Developer > Edit "
                f"Config):\n{servers}")
    if client == "cursor":
        return f"# merge into .cursor/mcp.json (project) or ~/.cursor/mcp.json:\n{servers}"
    if client == "codex":
        args = ", ".join(json.dumps(a) for a in ["mcp", "--key", key])
        return ("# append to ~/.codex/config.toml:\n[mcp_servers.memledger]\n"
                f"command = {json.dumps(exe)}\nargs = [{args}]")
    if client == "http":
        body = json.dumps({"mcpServers": {"memledger": {
            "url": f"http://127.0.0.1:{port}/mcp"}}}, indent=2)
        return (f"# start the server: {shlex.quote(exe)} mcp --http --port {port} --key "
                f"{shlex.quote(key)}\n# then point the host at it:\n{body}")
    raise ValueError(f"unknown client {client!r}")
