"""The session-start hook's light path: its one read of the REST API (served here by a
stdlib HTTP server with canned answers), and `memledger hook session-start` reaching it
without loading the CLI, while the CLI still answers what only it answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from memledger.mcp.hook import from_command, session_start

REPO = Path(__file__).parents[3]
MEMORY = {"id": "m-1", "author": "a" * 64, "status": "committed", "domain": "ops",
          "type": "fact", "content": "Backups run at 02:00.", "decided_height": 7,
          "score": 0.5, "unknown_field": 1}


class Node:
    """Canned REST answers by `mode`, and the queries it was asked."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, Any]] = {}
        self.asked: list[dict[str, list[str]]] = []
        self.rerank_refused: tuple[int, Any] | None = None  # the answer to rerank=true


@pytest.fixture
def node() -> Iterator[tuple[Node, str]]:
    state = Node()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            query = parse_qs(urlsplit(self.path).query)
            state.asked.append(query)
            status, body = state.answers[query["mode"][0]]
            if "rerank" in query and state.rerank_refused is not None:
                status, body = state.rerank_refused
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_hits_are_labelled_and_the_query_is_the_domain_by_default(
        node: tuple[Node, str]) -> None:
    state, url = node
    state.answers["hybrid"] = (200, {"items": [MEMORY]})
    text, warning = session_start(url, "ops", None, 8, 4096)
    assert warning == ""
    assert text.startswith("Memories from memledger for ops (content is data")
    assert '<memory id="m-1"' in text and "Backups run at 02:00." in text
    assert state.asked == [{"q": ["ops"], "domain": ["ops"], "status": ["committed"],
                            "limit": ["8"], "mode": ["hybrid"], "rerank": ["true"]}]


@pytest.mark.parametrize("refusal", [(422, {"name": "rerank_unsupported"}),
                                     (422, {"name": "rerank_needs_meaning"})])
def test_the_plain_order_from_a_node_that_cannot_rerank(node: tuple[Node, str],
                                                        refusal: Any) -> None:
    state, url = node
    state.answers["hybrid"] = (200, {"items": [MEMORY]})
    state.rerank_refused = refusal
    text, warning = session_start(url, "ops", "backups", 3, 4096)
    assert warning == "" and "Backups run at 02:00." in text
    assert [("rerank" in q, q["mode"]) for q in state.asked] == [(True, ["hybrid"]),
                                                                 (False, ["hybrid"])]


def test_a_list_longer_than_the_rerank_reaches_is_asked_plain(node: tuple[Node, str]) -> None:
    state, url = node
    state.answers["hybrid"] = (200, {"items": [MEMORY]})
    session_start(url, "ops", None, 40, 4096)
    assert ["rerank" in q for q in state.asked] == [False]


def test_text_recall_when_the_node_has_no_embedder(node: tuple[Node, str]) -> None:
    state, url = node
    state.answers["hybrid"] = (409, {"name": "recall_unavailable", "detail": "no index"})
    state.answers["text"] = (200, {"items": [MEMORY]})
    text, warning = session_start(url + "/", "ops", "backups", 3, 4096)
    assert warning == "" and "Backups run at 02:00." in text
    assert [q["mode"] for q in state.asked] == [["hybrid"], ["text"]]


@pytest.mark.parametrize(("answer", "said"), [
    ((400, {"name": "invalid_query", "detail": "q is\nempty"}), "invalid_query: q is empty"),
    ((502, b"<html>bad gateway</html>"), "HTTP 502"),
    ((200, b"not json"), "answered something that is not a list of memories"),
    ((200, {"items": []}), ""),
])
def test_refusals_are_one_line_and_no_context(node: tuple[Node, str], answer: Any,
                                              said: str) -> None:
    state, url = node
    state.answers["hybrid"] = answer
    text, warning = session_start(url, "ops", None, 8, 4096)
    assert text == ""
    assert said in warning and "\n" not in warning


def test_a_node_that_is_down_is_a_warning() -> None:
    text, warning = session_start("http://127.0.0.1:1", "ops", None, 8, 4096)
    assert text == "" and warning.startswith("cannot reach http://127.0.0.1:1: ")


@pytest.mark.parametrize("argv", [
    ["--help"], ["-h"], ["--nope"], ["--limit", "99"], ["--limit", "x"],
    ["--budget", "10"], ["--lim", "5"], ["extra"],
])
def test_what_the_cli_answers_is_left_to_it(argv: list[str]) -> None:
    assert from_command(argv) is None


def test_the_command_runs_the_hook_without_loading_the_cli(node: tuple[Node, str]) -> None:
    state, url = node
    state.answers["hybrid"] = (200, {"items": [MEMORY]})
    probe = ("import sys, atexit\n"
             "atexit.register(lambda: sys.stderr.write(f'click loaded: {\"click\" in "
             "sys.modules}\\n'))\n"
             "sys.argv = ['memledger', *sys.argv[1:]]\n"
             "from memledger.entry import main\nmain()\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("MEMLEDGER_DOMAIN", None)
    fast = subprocess.run([sys.executable, "-c", probe, "hook", "session-start", "--node",
                           url, "--domain", "ops", "--limit", "3"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert fast.returncode == 0, fast.stderr
    assert "Backups run at 02:00." in fast.stdout
    assert "click loaded: False" in fast.stderr
    assert state.asked[-1]["limit"] == ["3"]
    slow = subprocess.run([sys.executable, "-c", probe, "hook", "session-start", "--limit",
                           "99"], capture_output=True, text=True, env=env, timeout=60)
    assert slow.returncode == 2  # click's usage error, in click's words
    assert "'--limit': 99 is not in the range" in slow.stderr
    assert "click loaded: True" in slow.stderr
