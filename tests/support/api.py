"""The REST API served by real uvicorn in a thread, for SDK tests over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from memledger.api import ApiSettings, create_app
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
