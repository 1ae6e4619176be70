"""Result code -> HTTP status table, problem documents, and FTS5 query quoting."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memledger.api.problems import (
    CODE_TYPE_PREFIX,
    TYPE_PREFIX,
    Problem,
    code_name,
    http_status_for_code,
    tx_rejected,
)
from memledger.api.search import fts5_query, query_words
from memledger.protocol.codes import DESCRIPTIONS, Code


@pytest.mark.parametrize("code", [c for c in Code if c != Code.OK])
def test_every_rejection_code_is_a_4xx(code: Code) -> None:
    assert 400 <= http_status_for_code(int(code)) < 500


def test_specific_statuses() -> None:
    assert http_status_for_code(Code.BAD_SIGNATURE) == 400
    assert http_status_for_code(Code.NONCE_REPLAYED) == 409
    assert http_status_for_code(Code.DOMAIN_WRITE_DENIED) == 403
    assert http_status_for_code(Code.MEMORY_NOT_FOUND) == 404
    assert http_status_for_code(Code.TX_TOO_LARGE) == 413
    assert http_status_for_code(Code.SIGNER_BACKLOG_FULL) == 429  # retried by clients
    assert http_status_for_code(Code.INVALID_TAG) == 422
    assert http_status_for_code(9999) == 422 and code_name(9999) == "unknown_9999"


def test_tx_rejection_problem_carries_code_and_name() -> None:
    body = tx_rejected(8, "", "ab" * 32).body("/v1/txs")
    assert body["status"] == 400 and body["code"] == 8 and body["name"] == "bad_signature"
    assert body["title"] == DESCRIPTIONS[Code.BAD_SIGNATURE]
    assert body["detail"] == DESCRIPTIONS[Code.BAD_SIGNATURE]
    assert body["type"] == "urn:memledger:code:bad_signature"
    assert body["hash"] == "ab" * 32 and body["instance"] == "/v1/txs"


def test_a_full_signer_backlog_says_when_to_retry() -> None:
    """A 429, like the rate limit's, carries Retry-After; other rejections do not."""
    full = tx_rejected(int(Code.SIGNER_BACKLOG_FULL), "", "ab" * 32, stage="admission")
    response = full.response("/v1/txs")
    assert response.status_code == 429 and response.headers["retry-after"] == "1"
    assert "retry-after" not in tx_rejected(8, "", "ab" * 32).response().headers


def test_problem_defaults() -> None:
    body = Problem(404, "not_found", "no memory with id 'x'").body()
    assert body == {"type": "urn:memledger:problem:not_found", "title": "Not Found",
                    "status": 404, "detail": "no memory with id 'x'", "name": "not_found"}


def test_codes_doc_names_the_problem_types_the_api_sends() -> None:
    """docs/CODES.md once promised https://memledger.dev/problems/<name> URLs."""
    doc = (Path(__file__).parents[2] / "docs" / "CODES.md").read_text()
    prose = "\n".join(line for line in doc.splitlines() if not line.startswith("|"))
    assert f"`{CODE_TYPE_PREFIX}<name>`" in prose and f"`{TYPE_PREFIX}<name>`" in prose
    assert "://" not in prose
    assert tx_rejected(2, "", "ab" * 32).type == f"{CODE_TYPE_PREFIX}tx_decode"


@pytest.mark.parametrize("text", ['a"b', "x OR y", "NEAR(a b)", "col:val", "pre*", "^start",
                                  "-neg +pos", "(paren", "a AND NOT b", 'he said ""hi""'])
def test_fts5_query_never_breaks_the_parser(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("create virtual table t using fts5(body)")
    conn.execute("insert into t(body) values (?)", (text,))
    rows = conn.execute("select body from t where t match ?", (fts5_query(text),)).fetchall()
    assert rows == [(text,)]


def test_fts5_query_without_a_word_is_none() -> None:
    assert fts5_query(" - * ") is None


def test_control_characters_separate_words() -> None:
    assert fts5_query("a\x00b\x1bc\td") == '"a" "b" "c" "d"'
    assert query_words("x\u3000y -- z") == ["x", "y", "z"]


def test_tx_rejection_detail_states_the_rule_and_the_specifics() -> None:
    """`content_too_large` used to say only "content is N bytes", not the limit."""
    body = tx_rejected(int(Code.CONTENT_TOO_LARGE), "content is 600000 bytes", "ab" * 32).body()
    assert body["detail"] == "content larger than 512 KiB: content is 600000 bytes"
    again = tx_rejected(8, DESCRIPTIONS[Code.BAD_SIGNATURE], "ab" * 32).body()
    assert again["detail"] == DESCRIPTIONS[Code.BAD_SIGNATURE]  # never said twice
