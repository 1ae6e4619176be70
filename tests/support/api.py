"""The REST API for tests: served by real uvicorn in a thread (SDK tests over real HTTP),
and the settings a node home gives it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from memledger.api import ApiSettings, create_app
from memledger.daemon.home import NodeConfig, NodeHome
from memledger.sdk.waiting import wait_until
from tests.support.ports import free_port


@contextmanager
def served_api(settings: ApiSettings) -> Iterator[str]:
    """The API's base URL while it serves on a free port; stopped on exit."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 20, 0.05, what="uvicorn to start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def settings_with_extra(root: Path, extra: dict[str, str]) -> ApiSettings:
    """The REST settings of a new node home at `root` whose config's `extra` is `extra`:
    how a node reads its switches (errors included)."""
    home = NodeHome(root)
    home.save(NodeConfig())
    data = json.loads(home.config_file.read_text())
    data["extra"] = extra
    home.config_file.write_text(json.dumps(data))
    return ApiSettings.from_home(home)
